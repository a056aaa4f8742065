#include "kiln/engine/json/json_number_bounds.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

namespace kiln::engine {
namespace {

long double pow10(int e) {
  long double r = 1;
  for (int i = 0; i < e; ++i) r *= 10;
  return r;
}

// An interval of values with open or closed ends.
struct Interval {
  long double a, b;
  bool a_open, b_open;
};

Interval negate(const Interval& v) { return {-v.b, -v.a, v.b_open, v.a_open}; }

// The interval meets the bounds.
bool meets(const NumberBounds& bd, const Interval& v) {
  // The larger of the two lower ends, open if the one that decides is open (both when equal).
  long double lo = v.a;
  bool lo_open = v.a_open;
  if (bd.has_lo && (bd.lo > lo || (bd.lo == lo && bd.lo_open))) {
    lo = bd.lo;
    lo_open = bd.lo_open || (bd.lo == v.a && v.a_open);
  }
  long double hi = v.b;
  bool hi_open = v.b_open;
  if (bd.has_hi && (bd.hi < hi || (bd.hi == hi && bd.hi_open))) {
    hi = bd.hi;
    hi_open = bd.hi_open || (bd.hi == v.b && v.b_open);
  }
  return lo < hi || (lo == hi && !lo_open && !hi_open);
}

bool meets_signed(const NumberBounds& bd, Interval magnitudes, bool negative) {
  return meets(bd, negative ? negate(magnitudes) : magnitudes);
}

}  // namespace

bool number_in_bounds(const NumberBounds& b, const NumberSoFar& n) {
  if (n.frac_digits == 0) {  // an integer: exact, as validators compare integers
    const auto v = static_cast<long double>(n.mantissa);
    return meets_signed(b, {v, v, false, false}, n.negative);
  }
  // A fraction: as a double, the value validators read from the text (rounding is monotonic,
  // so this admits every value the exact reading admits, and ties that round onto a bound).
  std::string digits = std::to_string(n.mantissa);
  const auto width = static_cast<size_t>(n.int_digits + n.frac_digits);
  if (digits.size() < width) digits.insert(0, width - digits.size(), '0');
  const size_t point = digits.size() - static_cast<size_t>(n.frac_digits);
  const std::string text =
      std::string(n.negative ? "-" : "") + digits.substr(0, point) + "." + digits.substr(point);
  const double v = std::strtod(text.c_str(), nullptr);
  const bool above =
      !b.has_lo || (b.lo_open ? v > static_cast<double>(b.lo) : v >= static_cast<double>(b.lo));
  const bool below =
      !b.has_hi || (b.hi_open ? v < static_cast<double>(b.hi) : v <= static_cast<double>(b.hi));
  return above && below;
}

namespace {

// Some N in [first, last] makes a number within `b`: N's digits with `frac` of them after the
// point (int_digits before it), signed. Within means twice: the decimal value exactly (so
// "0.24" stays refused under a minimum of 0.25 although "0.24999999999999999" reads as the
// double 0.25) and the double a validator reads (number_in_bounds, which completes the value);
// only the latter when no decimal of at most 18 digits is exactly within
// (NumberBounds::by_double_only: [0.1, 0.1]). A grid, not a continuum: a bound interval
// narrower than the finest fraction still writable ((0, 1e-320] with at most 18 digits) holds
// no such number, and a prefix only the continuum reaches would be a dead end.
bool grid_point_within(const NumberBounds& b, bool negative, uint64_t first, uint64_t last,
                       int int_digits, int frac) {
  // Bounds on the magnitude N / 10^frac, in units of the last digit.
  const long double unit = pow10(frac);
  const bool has_lo = negative ? b.has_hi : b.has_lo;
  const bool lo_open = negative ? b.hi_open : b.lo_open;
  const long double lo = (negative ? -b.hi : b.lo) * unit;
  const bool has_hi = negative ? b.has_lo : b.has_hi;
  const bool hi_open = negative ? b.lo_open : b.hi_open;
  const long double hi = (negative ? -b.lo : b.hi) * unit;
  auto exact_above = [&](uint64_t v) {
    const auto x = static_cast<long double>(v);
    return b.by_double_only || !has_lo || (lo_open ? x > lo : x >= lo);
  };
  auto exact_below = [&](uint64_t v) {
    const auto x = static_cast<long double>(v);
    return b.by_double_only || !has_hi || (hi_open ? x < hi : x <= hi);
  };
  auto reads_in = [&](uint64_t v, const NumberBounds& bounds) {
    NumberSoFar n;
    n.negative = negative;
    n.mantissa = v;
    n.int_digits = int_digits;
    n.frac_digits = frac;
    return number_in_bounds(bounds, n);
  };
  // The smallest N exactly above the lower bound (both tests are monotonic in N).
  uint64_t n0 = first;
  if (has_lo && !exact_above(first)) {
    if (lo > static_cast<long double>(last)) return false;
    n0 = std::max(first, static_cast<uint64_t>(std::max<long double>(0, std::floor(lo))));
    while (n0 > first && exact_above(n0 - 1)) --n0;
    while (n0 <= last && !exact_above(n0)) ++n0;
    if (n0 > last) return false;
  }
  if (!exact_below(n0)) return false;
  if (reads_in(n0, b)) return true;
  // Rare: the double of n0 falls on an open bound (or just outside a closed one) though its
  // decimal value is inside. The smallest N whose double is above the lower bound too, found by
  // galloping and bisection; it decides.
  NumberBounds lower = b;
  (negative ? lower.has_lo : lower.has_hi) = false;
  auto above = [&](uint64_t v) { return reads_in(v, lower); };
  uint64_t lo_n = n0, hi_n = last;  // not above(lo_n) unless lo_n is the answer
  if (!above(n0)) {
    for (uint64_t step = 1;; step *= 2) {
      if (last - lo_n < step) {
        if (!above(last)) return false;
        hi_n = last;
        break;
      }
      if (above(lo_n + step)) {
        hi_n = lo_n + step;
        break;
      }
      lo_n += step;
    }
    while (hi_n - lo_n > 1) {  // above(hi_n), not above(lo_n)
      const uint64_t mid = lo_n + (hi_n - lo_n) / 2;
      (above(mid) ? hi_n : lo_n) = mid;
    }
    lo_n = hi_n;
  }
  return exact_below(lo_n) && reads_in(lo_n, b);
}

uint64_t pow10_u(int e) {
  uint64_t r = 1;
  for (int i = 0; i < e; ++i) r *= 10;
  return r;
}

// A number whose integer digits start with `m` (int_digits of them so far, m > 0), followed
// by more integer digits and, unless `integer`, a fraction: some completion is within `b`.
bool int_prefix_reachable(const NumberBounds& b, bool negative, uint64_t m, int int_digits,
                          bool integer) {
  for (int d = 0; int_digits + d <= kMaxBoundedDigits; ++d) {
    // d more integer digits, then up to (18 - all integer digits) fraction digits.
    const int frac = integer ? 0 : kMaxBoundedDigits - int_digits - d;
    const uint64_t span = pow10_u(d + frac);
    if (grid_point_within(b, negative, m * span, m * span + span - 1, int_digits + d, frac)) {
      return true;
    }
  }
  return false;
}

}  // namespace

bool number_reachable(const NumberBounds& b, const NumberSoFar& n, bool integer) {
  const int digits = n.int_digits + n.frac_digits;
  switch (n.at) {
    case NumberPrefix::kSign:
      // A first digit: "0" (and a fraction after it) or 1-9 and whatever follows.
      if (grid_point_within(b, n.negative, 0, 0, 1, 0)) return true;  // "0"
      if (!integer && grid_point_within(b, n.negative, 0, pow10_u(kMaxBoundedDigits - 1) - 1, 1,
                                        kMaxBoundedDigits - 1)) {
        return true;
      }
      for (uint64_t first = 1; first <= 9; ++first) {
        if (int_prefix_reachable(b, n.negative, first, 1, integer)) return true;
      }
      return false;
    case NumberPrefix::kZero:
      // "0" (no digit may follow it), or "0." and fraction digits.
      if (grid_point_within(b, n.negative, 0, 0, 1, 0)) return true;
      return !integer && grid_point_within(b, n.negative, 0, pow10_u(kMaxBoundedDigits - 1) - 1, 1,
                                           kMaxBoundedDigits - 1);
    case NumberPrefix::kInt:
      // At the digit limit no fraction can follow: integers only (int_prefix_reachable's last
      // round has no fraction digits left).
      return int_prefix_reachable(b, n.negative, n.mantissa, n.int_digits, integer);
    case NumberPrefix::kDot:
    case NumberPrefix::kFrac: {
      // More fraction digits: every number up to the digit limit that starts with these digits.
      // A "." needs at least one of them.
      if (n.at == NumberPrefix::kDot && digits >= kMaxBoundedDigits) return false;
      // A fraction that is itself in bounds, read as validators read it (a double): "10.1"
      // under a maximum of 10.1, whose double lies just below the decimal value.
      if (n.at == NumberPrefix::kFrac && number_in_bounds(b, n)) return true;
      const int more = kMaxBoundedDigits - digits;
      const uint64_t span = pow10_u(more);
      return grid_point_within(b, n.negative, n.mantissa * span, n.mantissa * span + span - 1,
                               n.int_digits, n.frac_digits + more);
    }
  }
  return false;
}

}  // namespace kiln::engine
