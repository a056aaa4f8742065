// Internal: the KV write conversions written once over an ISA's vector type S: f32 -> f16
// (F16C rounding: nearest even) and f32 -> q8 blocks. Include only from ISA files after the S
// header.
#pragma once
#include <cstdint>

#include "kiln/kernels/kv_cache_isa.h"

namespace kiln::kernels {

template <class S>
struct KvSimd {
  static constexpr int W = S::W;
  using F = typename S::F;

  static void to_f16_row(const float* src, uint16_t* dst, int64_t n) {
    int64_t i = 0;
    for (; i + W <= n; i += W) S::store_f16(dst + i, S::load(src + i));
    if (i < n) {
      int m = static_cast<int>(n - i);
      S::store_f16_n(dst + i, S::load_n(src + i, m), m);
    }
  }

  // The same operations as quantize_q8_block_ref: the maximum is exact whatever the order, the
  // product is one rounding, and S::store_i8_n rounds to nearest even like the reference.
  static float to_q8_block(const float* src, int8_t* dst, int64_t n) {
    F mv = S::zero();
    int64_t i = 0;
    for (; i + W <= n; i += W) mv = S::max(S::abs(S::load(src + i)), mv);
    if (i < n) mv = S::max(S::abs(S::load_n(src + i, static_cast<int>(n - i))), mv);
    const float amax = S::hmax(mv);
    const float scale = amax / 127.0f;
    const F inv = S::set1(amax > 0.0f ? 127.0f / amax : 0.0f);
    for (i = 0; i + W <= n; i += W) S::store_i8_n(dst + i, S::mul(S::load(src + i), inv), W);
    if (i < n) {
      const int m = static_cast<int>(n - i);
      S::store_i8_n(dst + i, S::mul(S::load_n(src + i, m), inv), m);
    }
    return scale;
  }

  static constexpr detail::KvFns table() { return {to_f16_row, to_q8_block}; }
};

}  // namespace kiln::kernels
