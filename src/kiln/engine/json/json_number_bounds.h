// minimum / maximum / exclusiveMinimum / exclusiveMaximum for JSON-constrained decoding: whether
// a number being written can still end inside its schema's bounds, decided at every byte, so
// the matcher's invariant holds (every accepted prefix can be completed to a valid value).
//
// A bounded number is read as a sign, a mantissa (every digit so far, at most
// kMaxBoundedDigits of them) and how many of those digits follow the decimal point; it is
// written without an exponent (every value in bounds has such a form). The arithmetic is in
// long double, exact for integers below 2^64, so mantissas of up to 18 digits compare exactly
// with bounds given as JSON numbers (doubles or 64-bit integers). Below the digit limit the
// fractions a prefix can still reach are taken as a continuum: a bound interval narrower than
// the finest fraction left (10^-(18 - digits)) could be judged reachable and not be; schemas
// with bounds that close are not what tools write.
#pragma once
#include <cstdint>

namespace kiln::engine {

constexpr int kMaxBoundedDigits = 18;

struct NumberBounds {
  bool active = false;  // the schema gives at least one bound
  long double lo = 0, hi = 0;
  bool has_lo = false, has_hi = false;
  bool lo_open = false, hi_open = false;  // exclusiveMinimum / exclusiveMaximum
};

// Where a bounded number's text stands: after '-' (no digit yet), after a leading "0", inside
// the integer digits, right after '.', inside the fraction digits.
enum class NumberPrefix : uint8_t { kSign, kZero, kInt, kDot, kFrac };

struct NumberSoFar {
  bool negative = false;
  uint64_t mantissa = 0;  // all digits so far as one integer
  int int_digits = 0;
  int frac_digits = 0;
  NumberPrefix at = NumberPrefix::kSign;
};

// Some continuation of `n` (more digits, a fraction when `integer` is false, or nothing) is a
// number within `b`, written with at most kMaxBoundedDigits digits.
bool number_reachable(const NumberBounds& b, const NumberSoFar& n, bool integer);
// `n` as it stands (a complete number) is within `b`.
bool number_in_bounds(const NumberBounds& b, const NumberSoFar& n);

}  // namespace kiln::engine
