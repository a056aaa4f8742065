#include "kiln/engine/json/json_number_bounds.h"

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

bool number_reachable(const NumberBounds& b, const NumberSoFar& n, bool integer) {
  const int digits = n.int_digits + n.frac_digits;
  const long double m = static_cast<long double>(n.mantissa);
  switch (n.at) {
    case NumberPrefix::kSign: {
      // Any magnitude of up to kMaxBoundedDigits integer digits, or below 1 with a fraction.
      const long double top = pow10(kMaxBoundedDigits);
      return meets_signed(b, {0, integer ? top - 1 : top, false, !integer}, n.negative);
    }
    case NumberPrefix::kZero:
      // "0", or "0." and fraction digits: [0, 1).
      return meets_signed(b, {0, integer ? 0.0L : 1.0L, false, !integer}, n.negative);
    case NumberPrefix::kInt:
      // d more integer digits give [m 10^d, (m+1) 10^d), a fraction filling the gaps.
      // At the digit limit no fraction can follow: integers only.
      for (int d = 0; digits + d <= kMaxBoundedDigits; ++d) {
        const long double scale = pow10(d);
        const bool whole = integer || digits + d == kMaxBoundedDigits;
        const Interval v = whole ? Interval{m * scale, (m + 1) * scale - 1, false, false}
                                 : Interval{m * scale, (m + 1) * scale, false, true};
        if (meets_signed(b, v, n.negative)) return true;
      }
      return false;
    case NumberPrefix::kDot:
    case NumberPrefix::kFrac: {
      // More fraction digits stay in [v, v + 10^-k); a "." needs at least one of them.
      if (n.at == NumberPrefix::kDot && digits >= kMaxBoundedDigits) return false;
      // A fraction that is itself in bounds, read as validators read it (a double): the
      // interval below is exact and would refuse "10.1" under a maximum of 10.1, whose double
      // lies just below the decimal value.
      if (n.at == NumberPrefix::kFrac && number_in_bounds(b, n)) return true;
      const int k = n.frac_digits;
      const long double v = m / pow10(k);
      if (digits >= kMaxBoundedDigits) return meets_signed(b, {v, v, false, false}, n.negative);
      return meets_signed(b, {v, v + 1 / pow10(k), false, true}, n.negative);
    }
  }
  return false;
}

}  // namespace kiln::engine
