// Internal: RoPE written once over an ISA's vector type S. Include only from ISA files after
// the S header.
#pragma once
#include <cstdint>

#include "kiln/kernels/rope.h"
#include "kiln/kernels/rope_isa.h"

namespace kiln::kernels {

template <class S>
struct RopeSimd {
  using F = typename S::F;
  static constexpr int W = S::W;

  static void cos_sin(int32_t pos, const float* inv_freq, float* cos_out, float* sin_out,
                      int half) {
    S::cos_sin(static_cast<double>(pos), inv_freq, cos_out, sin_out, half);
  }

  // x0' = x0 c - x1 s, x1' = x1 c + x0 s over the first n_rot dimensions. Both halves of a
  // pair are loaded before either is stored, so out may alias x.
  static void rotate_neox(const float* x, float* out, int n_rot, const float* c_t,
                          const float* s_t) {
    int half = n_rot / 2;
    for (int i = 0; i < half; i += W) {
      int m = half - i < W ? half - i : W;
      F x0 = S::load_n(x + i, m), x1 = S::load_n(x + half + i, m);
      F c = S::load_n(c_t + i, m), s = S::load_n(s_t + i, m);
      F o0 = S::fnma(x1, s, S::mul(x0, c));
      F o1 = S::fma(x0, s, S::mul(x1, c));
      S::store_n(out + i, o0, m);
      S::store_n(out + half + i, o1, m);
    }
  }

  // Adjacent pairs: with c2 = (c0, c0, c1, c1, ...) and s2 = (-s0, s0, -s1, s1, ...),
  // out = x * c2 + swap_pairs(x) * s2 over the first n_rot dimensions. W is even and so are
  // n_rot and every tail, so pairs never split.
  static void rotate_adjacent(const float* x, float* out, int n_rot, const float* c2,
                              const float* s2) {
    for (int j = 0; j < n_rot; j += W) {
      int m = n_rot - j < W ? n_rot - j : W;
      F v = S::load_n(x + j, m);
      F o = S::fma(S::swap_pairs(v), S::load_n(s2 + j, m), S::mul(v, S::load_n(c2 + j, m)));
      S::store_n(out + j, o, m);
    }
  }

  static void rotate_heads(const float* x, float* out, int n_heads, int hd, int n_rot, bool neox,
                           const float* cos_t, const float* sin_t) {
    if (neox) {
      for (int h = 0; h < n_heads; ++h) {
        rotate_neox(x + h * hd, out + h * hd, n_rot, cos_t, sin_t);
        detail::copy_unrotated(x + h * hd, out + h * hd, hd, n_rot);
      }
      return;
    }
    float c2[kRopeMaxHeadDim], s2[kRopeMaxHeadDim];
    for (int i = 0; i < n_rot / 2; ++i) {
      c2[2 * i] = c2[2 * i + 1] = cos_t[i];
      s2[2 * i] = -sin_t[i];
      s2[2 * i + 1] = sin_t[i];
    }
    for (int h = 0; h < n_heads; ++h) {
      rotate_adjacent(x + h * hd, out + h * hd, n_rot, c2, s2);
      detail::copy_unrotated(x + h * hd, out + h * hd, hd, n_rot);
    }
  }

  static constexpr detail::RopeFns table() { return {cos_sin, rotate_heads}; }
};

}  // namespace kiln::kernels
