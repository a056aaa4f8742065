// Internal: RMS norm and LayerNorm written once over an ISA's vector type S. Include only from ISA
// files after the S header.
#pragma once
#include <cmath>
#include <cstdint>

#include "kiln/kernels/norm_isa.h"

namespace kiln::kernels {

template <class S>
struct NormSimd {
  using F = typename S::F;
  static constexpr int W = S::W;

  // Four accumulators over consecutive vectors, the tail (masked, zero-filled) into the
  // second; one fixed reduction tree. The lane a value lands in depends only on its column.
  static float sum_squares(const float* x, int64_t n) {
    F a0 = S::zero(), a1 = S::zero(), a2 = S::zero(), a3 = S::zero();
    int64_t i = 0;
    for (; i + 4 * W <= n; i += 4 * W) {
      F v0 = S::load(x + i), v1 = S::load(x + i + W);
      F v2 = S::load(x + i + 2 * W), v3 = S::load(x + i + 3 * W);
      a0 = S::fma(v0, v0, a0);
      a1 = S::fma(v1, v1, a1);
      a2 = S::fma(v2, v2, a2);
      a3 = S::fma(v3, v3, a3);
    }
    for (; i + W <= n; i += W) {
      F v = S::load(x + i);
      a0 = S::fma(v, v, a0);
    }
    if (i < n) {
      F v = S::load_n(x + i, static_cast<int>(n - i));
      a1 = S::fma(v, v, a1);
    }
    return S::hsum(S::add(S::add(a0, a1), S::add(a2, a3)));
  }

  static void rms_norm_row(const float* x, const float* w, float* out, int64_t n, float eps) {
    float mean = sum_squares(x, n) / static_cast<float>(n);
    F inv = S::set1(1.0f / std::sqrt(mean + eps));
    int64_t i = 0;
    for (; i + W <= n; i += W)
      S::store(out + i, S::mul(S::mul(S::load(x + i), inv), S::load(w + i)));
    if (i < n) {
      int m = static_cast<int>(n - i);
      S::store_n(out + i, S::mul(S::mul(S::load_n(x + i, m), inv), S::load_n(w + i, m)), m);
    }
  }

  // The same fixed lane layout as sum_squares, over x itself (for the mean) and over
  // (x - mean)^2 (two passes: no cancellation in E[x^2] - E[x]^2 when |mean| >> stddev).
  static float sum(const float* x, int64_t n) {
    F a0 = S::zero(), a1 = S::zero();
    int64_t i = 0;
    for (; i + W <= n; i += W) a0 = S::add(a0, S::load(x + i));
    if (i < n) a1 = S::load_n(x + i, static_cast<int>(n - i));
    return S::hsum(S::add(a0, a1));
  }
  static float sum_centered_squares(const float* x, float mean, int64_t n) {
    F m = S::set1(mean), a0 = S::zero(), a1 = S::zero();
    int64_t i = 0;
    for (; i + W <= n; i += W) {
      F d = S::sub(S::load(x + i), m);
      a0 = S::fma(d, d, a0);
    }
    if (i < n) {
      const int k = static_cast<int>(n - i);
      // The masked load gives 0 past the tail: subtract the mean only where there is data.
      F d = S::sub(S::load_n(x + i, k), m);
      float tail[S::W] = {};
      S::store_n(tail, d, k);
      F dt = S::load(tail);
      a1 = S::fma(dt, dt, a1);
    }
    return S::hsum(S::add(a0, a1));
  }

  static void layer_norm_row(const float* x, const float* w, const float* b, float* out, int64_t n,
                             float eps) {
    const float mean = sum(x, n) / static_cast<float>(n);
    const float var = sum_centered_squares(x, mean, n) / static_cast<float>(n);
    F m = S::set1(mean);
    F inv = S::set1(1.0f / std::sqrt(var + eps));
    int64_t i = 0;
    for (; i + W <= n; i += W) {
      F v = S::mul(S::sub(S::load(x + i), m), inv);
      S::store(out + i, S::fma(v, S::load(w + i), S::load(b + i)));
    }
    if (i < n) {
      const int k = static_cast<int>(n - i);
      F v = S::mul(S::sub(S::load_n(x + i, k), m), inv);
      S::store_n(out + i, S::fma(v, S::load_n(w + i, k), S::load_n(b + i, k)), k);
    }
  }

  static constexpr detail::NormFns table() { return {rms_norm_row, layer_norm_row}; }
};

}  // namespace kiln::kernels
