// The bf16 contract's kernels (base/amx.h says what the contract is): a packed group's records
// decompressed to bf16 B tiles, the activations rounded to bf16 rows, and TDPBF16PS tile products
// that sum in f32 inside the tiles, with no float step per record (the int8 contract's wall on
// the matrix engine, docs/performance.md).
//
// A decompressed 32-input step of a group is one B tile: 16 rows (input pairs) x 16 columns x 2
// bf16, the pair (2p, 2p + 1) of column c at dword p * 16 + c. The packed codes are already
// grouped by 4 inputs per column (packed_weight.h), so a 64-byte vector of codes (16 columns x
// inputs 4j .. 4j + 3) becomes the tile rows 2j and 2j + 1 by two dword permutes.
#include <immintrin.h>

// GCC 12 flags its own _mm512_cvtepi32_ps (an intentionally undefined register, bug 105593).
#if defined(__GNUC__) && !defined(__clang__)  // clang has no -Wmaybe-uninitialized
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <bit>

#include "kiln/kernels/amx_tile_config.h"
#include "kiln/kernels/matmul_avx512_codes.h"
#include "kiln/kernels/matmul_kernels.h"
#include "kiln/kernels/quant_format.h"

namespace kiln::kernels {
namespace {

using avx512::e8m0_16;
using avx512::load_codes;
using avx512::split_min16;
using avx512::split_scale16;
using avx512::table_codes;

// How far ahead of the record being decompressed the packed stream is asked for (as the
// AVX-512 kernels' first tiles do): at batch 1 the decompression reads the weights from DRAM.
constexpr int kPrefetchBytes = 2048;

// tmm0-3: f32 accumulators of up to four 16-row tiles; tmm4-5: their A (16 rows x 32 bf16
// activations, taking turns); tmm6: the step's B (the decompressed weights).
TileConfig bf16_tile_config() {
  TileConfig c;
  for (int t = 0; t < 7; ++t) {
    c.colsb[t] = 64;
    c.rows[t] = 16;
  }
  return c;
}

void configure_bf16_tiles() {
  static const TileConfig config = bf16_tile_config();
  use_tile_config(TileConfigId::Bf16, config);
}

// The 16 columns' scale (and minimum) of record s, one lane per column, as the int8 contract's
// dequantization forms them (dequantize_row: f16 scales converted, K-quants' d * sc exact).
template <QuantFormat F>
inline void record_scales(const uint8_t* group, const SplitScaleAreas& areas, int64_t s,
                          const uint8_t* rec, __m512& scale, __m512& minimum) {
  const uint8_t* tail = rec + F.code_bytes();
  if constexpr (F.split_scales) {
    scale = split_scale16<F>(group, areas, s);
    if constexpr (F.has_min) minimum = split_min16<F>(group, areas, s);
  } else if constexpr (F.record_scale == RecordScale::E8M0) {
    scale = e8m0_16(tail);
  } else {
    scale = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tail)));
    if constexpr (F.has_min)
      minimum = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tail + 32)));
  }
}

// Bf16DecompressFn of format F: per record, the codes unpacked to bytes (load_codes), and per
// 16 of them (4 columns x 4 inputs) the weight as dequantize_row computes it, scale * code -
// minimum or scale * (code - zero point), in f32, then rounded to bf16 (nearest even).
template <QuantFormat F>
void decompress_group(const uint8_t* group, int64_t k, int64_t s0, int64_t s1, uint16_t* out) {
  constexpr int S = F.sub_block;
  const SplitScaleAreas areas = split_scale_areas(F.code_bytes(), S, F.has_min, F.nibble_factors, k);
  // Lane l of quarter q belongs to column 4q + l / 4.
  __m512i quarter_cols[4];
  for (int q = 0; q < 4; ++q) {
    alignas(64) int32_t idx[16];
    for (int l = 0; l < 16; ++l) idx[l] = 4 * q + l / 4;
    quarter_cols[q] = _mm512_load_si512(idx);
  }
  // Dword d of a converted pair of quarters holds column d / 2's inputs (2h, 2h + 1), h = d % 2;
  // the tile rows take the even (h = 0) and odd (h = 1) dwords of both pairs.
  alignas(64) int32_t even_idx[16], odd_idx[16];
  for (int d = 0; d < 8; ++d) {
    even_idx[d] = 2 * d, even_idx[d + 8] = 16 + 2 * d;
    odd_idx[d] = 2 * d + 1, odd_idx[d + 8] = 17 + 2 * d;
  }
  const __m512i even = _mm512_load_si512(even_idx), odd = _mm512_load_si512(odd_idx);
  const __m512i zero_point = _mm512_set1_epi32(F.zero_point);
  uint16_t* o = out;
  for (int64_t s = s0; s < s1; ++s) {
    const uint8_t* rec = group + s * F.record_bytes();
    for (int l = 0; l < F.record_bytes(); l += 64)
      _mm_prefetch(reinterpret_cast<const char*>(rec + kPrefetchBytes + l), _MM_HINT_T0);
    __m512i w[S / 4];
    load_codes<F.bits, S>(rec, w);
    if constexpr (F.has_table) {
      const __m512i lut = table_codes<F>();
#pragma GCC unroll 8
      for (int j = 0; j < S / 4; ++j) w[j] = _mm512_shuffle_epi8(lut, w[j]);
    }
    __m512 scale16, min16 = _mm512_setzero_ps();
    record_scales<F>(group, areas, s, rec, scale16, min16);
    __m512 scale[4], minimum[4];
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      scale[q] = _mm512_permutexvar_ps(quarter_cols[q], scale16);
      if constexpr (F.has_min) minimum[q] = _mm512_permutexvar_ps(quarter_cols[q], min16);
    }
#pragma GCC unroll 8
    for (int j = 0; j < S / 4; ++j) {
      __m512 v[4];
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {
        __m512i c = _mm512_cvtepu8_epi32(_mm512_extracti32x4_epi32(w[j], q));
        if constexpr (F.has_min) {
          v[q] = _mm512_sub_ps(_mm512_mul_ps(scale[q], _mm512_cvtepi32_ps(c)), minimum[q]);
        } else {
          c = _mm512_sub_epi32(c, zero_point);
          v[q] = _mm512_mul_ps(scale[q], _mm512_cvtepi32_ps(c));
        }
      }
      // cvtne2ps(a, b): words 0-15 from b, 16-31 from a.
      const __m512i lo = std::bit_cast<__m512i>(_mm512_cvtne2ps_pbh(v[1], v[0]));  // cols 0-7
      const __m512i hi = std::bit_cast<__m512i>(_mm512_cvtne2ps_pbh(v[3], v[2]));  // cols 8-15
      _mm512_storeu_si512(o + (2 * j) * 32, _mm512_permutex2var_epi32(lo, even, hi));
      _mm512_storeu_si512(o + (2 * j + 1) * 32, _mm512_permutex2var_epi32(lo, odd, hi));
    }
    o += S * 16;
  }
}

// Accumulates `steps` 32-input steps into NT tiles of 16 activation rows: A from rows a, a +
// 16 rows, ... (a_stride bytes apart), B from b (kBf16StepBytes per step). The tile numbers
// are assembler text, so each tile has its own line.
template <int NT>
void accumulate(const uint16_t* b, const uint16_t* a, int64_t a_stride, int64_t steps) {
  const int64_t tile_rows = 16 * a_stride / 2;  // elements between two 16-row tiles' starts
  for (int64_t t = 0; t < steps; ++t) {
    const uint16_t* at = a + 32 * t;
    _tile_loadd(6, b + t * (kBf16StepBytes / 2), 64);
    _tile_loadd(4, at, a_stride);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (NT > 1) {
      _tile_loadd(5, at + tile_rows, a_stride);
      _tile_dpbf16ps(1, 5, 6);
    }
    if constexpr (NT > 2) {
      _tile_loadd(4, at + 2 * tile_rows, a_stride);
      _tile_dpbf16ps(2, 4, 6);
    }
    if constexpr (NT > 3) {
      _tile_loadd(5, at + 3 * tile_rows, a_stride);
      _tile_dpbf16ps(3, 5, 6);
    }
  }
}

}  // namespace

Bf16DecompressFn bf16_decompress_fn(DType t) {
  return visit_quant_format(
      t, []<QuantFormat F>() -> Bf16DecompressFn { return decompress_group<F>; },
      Bf16DecompressFn{nullptr});
}

void rows_to_bf16(const float* x, int64_t k, int64_t rows, uint16_t* out) {
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < k; j += 32) {
      const __m512 lo = _mm512_loadu_ps(x + i * k + j), hi = _mm512_loadu_ps(x + i * k + j + 16);
      _mm512_storeu_si512(out + i * k + j, std::bit_cast<__m512i>(_mm512_cvtne2ps_pbh(hi, lo)));
    }
  }
}

void bf16_tiles_zero(int nt) {
  configure_bf16_tiles();
  _tile_zero(0);
  if (nt > 1) _tile_zero(1);
  if (nt > 2) _tile_zero(2);
  if (nt > 3) _tile_zero(3);
}

void bf16_tiles_accumulate(const uint16_t* b, const uint16_t* a, int64_t a_stride, int64_t steps,
                           int nt) {
  switch (nt) {
    case 1:
      return accumulate<1>(b, a, a_stride, steps);
    case 2:
      return accumulate<2>(b, a, a_stride, steps);
    case 3:
      return accumulate<3>(b, a, a_stride, steps);
    default:
      return accumulate<4>(b, a, a_stride, steps);
  }
}

void bf16_tiles_store(int nt, float* c) {
  _tile_stored(0, c, 64);
  if (nt > 1) _tile_stored(1, c + 256, 64);
  if (nt > 2) _tile_stored(2, c + 512, 64);
  if (nt > 3) _tile_stored(3, c + 768, 64);
}

}  // namespace kiln::kernels
