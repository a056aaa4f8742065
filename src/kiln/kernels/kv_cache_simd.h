// Internal: f32 -> f16 conversion written once over an ISA's vector type S (F16C rounding:
// nearest even). Include only from ISA files after the S header.
#pragma once
#include <cstdint>

#include "kiln/kernels/kv_cache_isa.h"

namespace kiln::kernels {

template <class S>
struct KvSimd {
  static constexpr int W = S::W;

  static void to_f16_row(const float* src, uint16_t* dst, int64_t n) {
    int64_t i = 0;
    for (; i + W <= n; i += W) S::store_f16(dst + i, S::load(src + i));
    if (i < n) {
      int m = static_cast<int>(n - i);
      S::store_f16_n(dst + i, S::load_n(src + i, m), m);
    }
  }

  static constexpr detail::KvFns table() { return {to_f16_row}; }
};

}  // namespace kiln::kernels
