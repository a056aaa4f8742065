// Internal: the encoder attention written once over an ISA's vector type S. Include only from
// ISA files after the S header.
#pragma once
#include <cmath>
#include <cstdint>
#include <limits>

#include "kiln/kernels/encoder_attention_isa.h"

namespace kiln::kernels {

template <class S>
struct EncoderAttentionSimd {
  using F = typename S::F;
  static constexpr int W = S::W;
  static constexpr int QB = detail::kEncoderQueryBlock;

  // Scores of queries [i0, i0 + nq) against all padded keys, then their softmax in place
  // (padded keys get probability 0).
  template <int NQ>
  static void scores(const float* q, int64_t stride, int64_t i0, int64_t len, int64_t lp,
                     int64_t hd, float scale, const float* kt, float* s) {
    for (int64_t j = 0; j < lp; j += W) {
      F acc[NQ];
      for (int r = 0; r < NQ; ++r) acc[r] = S::zero();
      for (int64_t d = 0; d < hd; ++d) {
        const F kv = S::load(kt + d * lp + j);
        for (int r = 0; r < NQ; ++r) acc[r] = S::fma(S::set1(q[(i0 + r) * stride + d]), kv, acc[r]);
      }
      for (int r = 0; r < NQ; ++r) S::store(s + r * lp + j, S::mul(acc[r], S::set1(scale)));
    }
    for (int r = 0; r < NQ; ++r) {
      float* row = s + r * lp;
      for (int64_t j = len; j < lp; ++j) row[j] = -std::numeric_limits<float>::infinity();
      F m = S::set1(-std::numeric_limits<float>::infinity());
      for (int64_t j = 0; j < lp; j += W) m = S::max(m, S::load(row + j));
      const F mx = S::set1(S::hmax(m));
      F sum = S::zero();
      for (int64_t j = 0; j < lp; j += W) {
        const F e = S::exp(S::sub(S::load(row + j), mx));
        S::store(row + j, e);
        sum = S::add(sum, e);
      }
      const F inv = S::set1(1.0f / S::hsum(sum));
      for (int64_t j = 0; j < lp; j += W) S::store(row + j, S::mul(S::load(row + j), inv));
    }
  }

  // out rows [i0, i0 + NQ) = probabilities s times v, head_dim in vectors (the last masked).
  template <int NQ>
  static void weighted_values(const float* v, int64_t stride, int64_t i0, int64_t len, int64_t lp,
                              int64_t hd, const float* s, float* out, int64_t out_stride) {
    for (int64_t d = 0; d < hd; d += W) {
      const int n = hd - d < W ? static_cast<int>(hd - d) : W;
      F acc[NQ];
      for (int r = 0; r < NQ; ++r) acc[r] = S::zero();
      for (int64_t j = 0; j < len; ++j) {
        const F vv = n == W ? S::load(v + j * stride + d) : S::load_n(v + j * stride + d, n);
        for (int r = 0; r < NQ; ++r) acc[r] = S::fma(S::set1(s[r * lp + j]), vv, acc[r]);
      }
      for (int r = 0; r < NQ; ++r) {
        float* o = out + (i0 + r) * out_stride + d;
        if (n == W)
          S::store(o, acc[r]);
        else
          S::store_n(o, acc[r], n);
      }
    }
  }

  template <int NQ>
  static void block(const float* q, const float* v, int64_t stride, int64_t i0, int64_t len,
                    int64_t lp, int64_t hd, float scale, const float* kt, float* s, float* out,
                    int64_t out_stride) {
    scores<NQ>(q, stride, i0, len, lp, hd, scale, kt, s);
    weighted_values<NQ>(v, stride, i0, len, lp, hd, s, out, out_stride);
  }

  static void run(const float* q, const float* k, const float* v, int64_t stride, int64_t len,
                  int64_t hd, float scale, float* out, int64_t out_stride, float* ws) {
    const int64_t lp = detail::encoder_padded_len(len);
    float* kt = ws;
    float* s = ws + hd * lp;
    for (int64_t d = 0; d < hd; ++d) {
      for (int64_t j = 0; j < len; ++j) kt[d * lp + j] = k[j * stride + d];
      for (int64_t j = len; j < lp; ++j) kt[d * lp + j] = 0.0f;
    }
    int64_t i = 0;
    for (; i + QB <= len; i += QB)
      block<QB>(q, v, stride, i, len, lp, hd, scale, kt, s, out, out_stride);
    for (; i < len; ++i) block<1>(q, v, stride, i, len, lp, hd, scale, kt, s, out, out_stride);
  }
};

}  // namespace kiln::kernels
