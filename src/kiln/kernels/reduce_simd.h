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

  static int64_t find_greater(const float* x, int64_t n, float thr) {
    F v = S::set1(thr);
    int64_t i = 0;
    for (; i + 2 * W <= n; i += 2 * W) {
      uint32_t lo = S::gt_mask(S::load(x + i), v);
      uint32_t hi = S::gt_mask(S::load(x + i + W), v);
      if ((lo | hi) != 0) return lo != 0 ? i + __builtin_ctz(lo) : i + W + __builtin_ctz(hi);
    }
    for (; i + W <= n; i += W) {
      uint32_t bits = S::gt_mask(S::load(x + i), v);
      if (bits != 0) return i + __builtin_ctz(bits);
    }
    for (; i < n; ++i)
      if (x[i] > thr) return i;
    return n;
  }

  static float exp_shift_sum(float* x, int64_t n, float m) {
    F mv = S::set1(m);
    F a0 = S::zero(), a1 = S::zero();
    int64_t i = 0;
    for (; i + 2 * W <= n; i += 2 * W) {
      F e0 = S::exp(S::sub(S::load(x + i), mv));
      F e1 = S::exp(S::sub(S::load(x + i + W), mv));
      S::store(x + i, e0);
      S::store(x + i + W, e1);
      a0 = S::add(a0, e0);
      a1 = S::add(a1, e1);
    }
    for (; i < n; i += W) {
      int c = n - i < W ? static_cast<int>(n - i) : W;
      F e = S::exp(S::sub(S::load_n(x + i, c), mv));
      S::store_n(x + i, e, c);
      a0 = S::add(a0, S::load_n(x + i, c));  // only the stored lanes count
    }
    return S::hsum(S::add(a0, a1));
  }

  static void scale(float* x, int64_t n, float factor) {
    F f = S::set1(factor);
    int64_t i = 0;
    for (; i + W <= n; i += W) S::store(x + i, S::mul(S::load(x + i), f));
    if (i < n) {
      int c = static_cast<int>(n - i);
      S::store_n(x + i, S::mul(S::load_n(x + i, c), f), c);
    }
  }

  static constexpr detail::ReduceFns table() {
    return {max_row, find_equal, find_greater, exp_shift_sum, scale};
  }
};

}  // namespace kiln::kernels
