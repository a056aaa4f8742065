// Internal: row reductions written once over an ISA's vector type S. Include only from ISA
// files after the S header.
#pragma once
#include <cstdint>

#include "kiln/kernels/reduce_isa.h"

namespace kiln::kernels {

template <class S>
struct ReduceSimd {
  using F = typename S::F;
  static constexpr int W = S::W;

  static float max_row(const float* x, int64_t n) {
    // max(data, acc) returns acc when data is NaN, so NaN is skipped.
    F a0 = S::set1(-__builtin_inff()), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 4 * W <= n; i += 4 * W) {
      a0 = S::max(S::load(x + i), a0);
      a1 = S::max(S::load(x + i + W), a1);
      a2 = S::max(S::load(x + i + 2 * W), a2);
      a3 = S::max(S::load(x + i + 3 * W), a3);
    }
    for (; i + W <= n; i += W) a0 = S::max(S::load(x + i), a0);
    float m = S::hmax(S::max(S::max(a0, a1), S::max(a2, a3)));
    for (; i < n; ++i)
      if (x[i] > m) m = x[i];
    return m;
  }

  static int64_t find_equal(const float* x, int64_t n, float value) {
    F v = S::set1(value);
    int64_t i = 0;
    for (; i + W <= n; i += W) {
      uint32_t bits = S::eq_mask(S::load(x + i), v);
      if (bits != 0) return i + __builtin_ctz(bits);
    }
    for (; i < n; ++i)
      if (x[i] == value) return i;
    return n;
  }

  static constexpr detail::ReduceFns table() { return {max_row, find_equal}; }
};

}  // namespace kiln::kernels
