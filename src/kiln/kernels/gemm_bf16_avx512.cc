// The bfloat16 tile on AVX512_BF16: vdpbf16ps, 8 rows x 32 columns of f32 sums in registers.
#include <immintrin.h>

#include <algorithm>

#include "kiln/kernels/gemm_bf16.h"
#include "kiln/kernels/gemm_bf16_isa.h"

namespace kiln::kernels::detail {
namespace {

__m512bh as_bh(__m512i v) { return reinterpret_cast<__m512bh&>(v); }

__mmask16 first(int n) {
  return static_cast<__mmask16>(n >= 16 ? 0xffffu : n <= 0 ? 0u : (1u << n) - 1u);
}

void pack_row(const float* x, int64_t k, uint32_t* dst) {
  int64_t i = 0;
  // vcvtne2ps2bf16 puts its second operand's 16 values first: (x[i..i+15], x[i+16..i+31]).
  for (; i + 32 <= k; i += 32) {
    const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(x + i));
    _mm512_storeu_si512(dst + i / 2, reinterpret_cast<const __m512i&>(v));
  }
  if (i < k) {
    const int r = static_cast<int>(k - i);  // zero-filled past k: an odd k's last pair is (x, 0)
    const __m512 lo = _mm512_maskz_loadu_ps(first(r), x + i);
    const __m512 hi = _mm512_maskz_loadu_ps(first(r - 16), x + i + 16);
    const __m512bh v = _mm512_cvtne2ps_pbh(hi, lo);
    _mm512_mask_storeu_epi32(dst + i / 2, first((r + 1) / 2), reinterpret_cast<const __m512i&>(v));
  }
}

template <int MT>
void tile_rows(const Bf16Tile& t) {
  __m512 acc[MT][2];
  for (int i = 0; i < MT; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  const uint32_t* g = t.group;
  for (int64_t p = 0; p < t.pairs; ++p, g += kBf16GroupCols) {
    const __m512bh w0 = as_bh(_mm512_load_si512(g));
    const __m512bh w1 = as_bh(_mm512_load_si512(g + 16));
#pragma GCC unroll 8
    for (int i = 0; i < MT; ++i) {
      const __m512bh xv = as_bh(_mm512_set1_epi32(static_cast<int>(t.x[i * t.x_stride + p])));
      acc[i][0] = _mm512_dpbf16_ps(acc[i][0], xv, w0);
      acc[i][1] = _mm512_dpbf16_ps(acc[i][1], xv, w1);
    }
  }
  const __mmask16 m0 = first(t.cols), m1 = first(t.cols - 16);
  const __m512 b0 = _mm512_maskz_loadu_ps(m0, t.bias), b1 = _mm512_maskz_loadu_ps(m1, t.bias + 16);
  for (int i = 0; i < MT; ++i) {
    __m512 o0 = _mm512_add_ps(acc[i][0], b0), o1 = _mm512_add_ps(acc[i][1], b1);
    if (t.residual != nullptr) {
      const float* r = t.residual + i * t.y_stride;
      o0 = _mm512_add_ps(o0, _mm512_maskz_loadu_ps(m0, r));
      o1 = _mm512_add_ps(o1, _mm512_maskz_loadu_ps(m1, r + 16));
    }
    float* y = t.y + i * t.y_stride;
    _mm512_mask_storeu_ps(y, m0, o0);
    _mm512_mask_storeu_ps(y + 16, m1, o1);
  }
}

void tile(const Bf16Tile& t) {
  static_assert(kBf16TileRows == 8);
  switch (t.mt) {
    case 1:
      return tile_rows<1>(t);
    case 2:
      return tile_rows<2>(t);
    case 3:
      return tile_rows<3>(t);
    case 4:
      return tile_rows<4>(t);
    case 5:
      return tile_rows<5>(t);
    case 6:
      return tile_rows<6>(t);
    case 7:
      return tile_rows<7>(t);
    default:
      return tile_rows<8>(t);
  }
}

}  // namespace

constinit const GemmBf16Fns kGemmBf16Avx512 = {pack_row, tile};

}  // namespace kiln::kernels::detail
