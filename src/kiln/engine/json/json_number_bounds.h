// minimum / maximum / exclusiveMinimum / exclusiveMaximum for JSON-constrained decoding: whether
// a number being written can still end inside its schema's bounds, decided at every byte, so
// the matcher's invariant holds (every accepted prefix can be completed to a valid value).
//
// A bounded number is read as a sign, a mantissa (every digit so far, at most
// kMaxBoundedDigits of them) and how many of those digits follow the decimal point; it is
// written without an exponent (every value in bounds has such a form). The arithmetic is in
// long double, exact for integers below 2^64, so mantissas of up to 18 digits compare exactly
// with bounds given as JSON numbers (doubles or 64-bit integers). What a prefix can still reach
// is the set of numbers of at most 18 digits that start with it, a grid, not a continuum: a bound
// interval narrower than the finest fraction left ((0, 1e-320]) holds none, and is refused when
// the schema compiles instead of leading the decoder into a dead end.
#pragma once
#include <cstdint>

namespace kiln::engine {

constexpr int kMaxBoundedDigits = 18;

struct NumberBounds {
  bool active = false;  // the schema gives at least one bound
  long double lo = 0, hi = 0;
  bool has_lo = false, has_hi = false;
  bool lo_open = false, hi_open = false;  // exclusiveMinimum / exclusiveMaximum
  // No decimal of at most kMaxBoundedDigits digits lies exactly within the bounds, but some read
  // as a double within them ({"minimum": 0.1, "maximum": 0.1}: the double 0.1 is no such
  // decimal): numbers are then judged by their double alone. Otherwise by both, so that a
  // prefix such as "0.24" is refused under a minimum of 0.25 although "0.24999999999999999"
  // reads as 0.25.
  bool by_double_only = false;
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
