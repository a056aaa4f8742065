// The bfloat16 tile on AVX2 (no bf16 instructions): each bf16 widened to f32 by a shift or a
// mask, then two FMAs per input pair, odd element first, as vdpbf16ps sums them (each product
// of two bf16 values is exact in f32, so the FMA rounds once, as its sum does).
#include <immintrin.h>

#include <algorithm>

#include "kiln/base/half.h"
#include "kiln/kernels/gemm_bf16.h"
#include "kiln/kernels/gemm_bf16_isa.h"

namespace kiln::kernels::detail {
namespace {

void pack_row(const float* x, int64_t k, uint32_t* dst) {
  // Rounding to nearest even in integers, as f32_to_bf16 does (NaN kept quiet), 8 at a time.
  int64_t i = 0;
  const __m256i ones = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff);
  const __m256i abs_mask = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
  const __m256i quiet = _mm256_set1_epi32(0x00400000);
  for (; i + 16 <= k; i += 16) {
    __m256i h[2];
    for (int j = 0; j < 2; ++j) {
      const __m256i b = _mm256_castps_si256(_mm256_loadu_ps(x + i + 8 * j));
      const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), ones);
      const __m256i rounded = _mm256_add_epi32(b, _mm256_add_epi32(bias, lsb));
      const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(b, abs_mask), inf);
      h[j] = _mm256_srli_epi32(_mm256_blendv_epi8(rounded, _mm256_or_si256(b, quiet), nan), 16);
    }
    // Pairs (x[2p], x[2p+1]): even lanes low, odd lanes high.
    for (int j = 0; j < 2; ++j) {
      const __m256i lo = _mm256_and_si256(h[j], _mm256_set1_epi64x(0xffff));
      const __m256i hi = _mm256_srli_epi64(h[j], 16);
      const __m256i pairs = _mm256_or_si256(lo, hi);  // 32-bit words in 64-bit lanes
      const __m256i packed =
          _mm256_permutevar8x32_epi32(pairs, _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i / 2 + 4 * j),
                       _mm256_castsi256_si128(packed));
    }
  }
  for (; i + 1 < k; i += 2)
    dst[i / 2] = static_cast<uint32_t>(f32_to_bf16(x[i])) |
                 (static_cast<uint32_t>(f32_to_bf16(x[i + 1])) << 16);
  if (i < k) dst[i / 2] = f32_to_bf16(x[i]);
}

template <int MT>
void tile_half(const Bf16Tile& t, int c0) {
  const __m256i hi_mask = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
  __m256 acc[MT][2];
  for (int i = 0; i < MT; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  const uint32_t* g = t.group + c0;
  for (int64_t p = 0; p < t.pairs; ++p, g += kBf16GroupCols) {
    __m256 we[2], wo[2];
    for (int j = 0; j < 2; ++j) {
      const __m256i w = _mm256_load_si256(reinterpret_cast<const __m256i*>(g + 8 * j));
      we[j] = _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
      wo[j] = _mm256_castsi256_ps(_mm256_and_si256(w, hi_mask));
    }
    for (int i = 0; i < MT; ++i) {
      const __m256i xw = _mm256_set1_epi32(static_cast<int>(t.x[i * t.x_stride + p]));
      const __m256 xe = _mm256_castsi256_ps(_mm256_slli_epi32(xw, 16));
      const __m256 xo = _mm256_castsi256_ps(_mm256_and_si256(xw, hi_mask));
      for (int j = 0; j < 2; ++j)
        acc[i][j] = _mm256_fmadd_ps(xe, we[j], _mm256_fmadd_ps(xo, wo[j], acc[i][j]));
    }
  }
  for (int i = 0; i < MT; ++i) {
    float out[16];
    _mm256_storeu_ps(out, acc[i][0]);
    _mm256_storeu_ps(out + 8, acc[i][1]);
    const int cols = std::min(16, t.cols - c0);
    float* y = t.y + i * t.y_stride + c0;
    for (int c = 0; c < cols; ++c) {
      const float o = out[c] + t.bias[c0 + c];
      y[c] = t.residual != nullptr ? o + t.residual[i * t.y_stride + c0 + c] : o;
    }
  }
}

template <int MT>
void tile_rows(const Bf16Tile& t) {
  tile_half<MT>(t, 0);
  if (t.cols > 16) tile_half<MT>(t, 16);
}

void tile(const Bf16Tile& t) {
  // Four rows at a time: 8 sums, 4 widened weights and 2 widened activations in 16 registers.
  Bf16Tile part = t;
  for (int i = 0; i < t.mt; i += 4) {
    part.x = t.x + i * t.x_stride;
    part.y = t.y + i * t.y_stride;
    part.residual = t.residual != nullptr ? t.residual + i * t.y_stride : nullptr;
    switch (std::min(4, t.mt - i)) {
      case 1:
        tile_rows<1>(part);
        break;
      case 2:
        tile_rows<2>(part);
        break;
      case 3:
        tile_rows<3>(part);
        break;
      default:
        tile_rows<4>(part);
        break;
    }
  }
}

}  // namespace

constinit const GemmBf16Fns kGemmBf16Avx2 = {pack_row, tile};

}  // namespace kiln::kernels::detail
