// The bf16 contract's kernels (base/amx.h says what the contract is): a packed group's records
// decompressed to bf16 B tiles, the activations rounded to bf16 rows, and TDPBF16PS tile products
// that sum in f32 inside the tiles, with no float step per record (the int8 contract's wall on
// the matrix engine, docs/performance.md).
//
// A decompressed 32-input step of a group is one B tile: 16 rows (input pairs) x 16 columns x 2
// bf16, the pair (2p, 2p + 1) of column c at dword p * 16 + c. The packed codes are already
// grouped by 4 inputs per column (packed_weight.h): a 64-byte vector of codes (16 columns x
// inputs 4j .. 4j + 3) becomes the tile rows 2j and 2j + 1. The activations are stored as A
// tiles, each 16 rows x 32 inputs in one contiguous KiB (rows K apart measured 4K-aliased loads).
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

// tmm0-3: f32 accumulators of up to four 16-row tiles (or two row tiles of two groups); tmm4-5:
// their A (16 rows x 32 bf16 activations, taking turns); tmm6-7: the step's B (the decompressed
// weights of one group, or of each of two).
TileConfig bf16_tile_config() {
  TileConfig c;
  for (int t = 0; t < 8; ++t) {
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
// input 4j + t the 16 columns' weights in one vector (byte t of each column's dword), as
// dequantize_row computes them, scale * code - minimum or scale * (code - zero point), in f32,
// then rounded to bf16 (nearest even) and interleaved in pairs. Every format's scale * code is
// exact in f32 (an f16 or power-of-two scale, times an integer factor of at most 8 bits, times
// a code of at most 8: 24 significant bits at most), so one fused multiply-subtract rounds as
// dequantize_row's multiply and subtract do. Shifts and masks instead of
// byte shuffles: the shuffle port was this loop's limit (about 200 cycles a 16 x 32 record with
// an extract and a zero extension per 16 codes, measured at batch 1).
template <QuantFormat F>
void decompress_group(const uint8_t* group, int64_t k, int64_t s0, int64_t s1, uint16_t* out) {
  constexpr int S = F.sub_block;
  const SplitScaleAreas areas =
      split_scale_areas(F.code_bytes(), S, F.has_min, F.nibble_factors, k);
  // Word 2c of a tile row is column c's even input (word c of cvtne2ps's low half), word 2c + 1
  // its odd one (word 16 + c).
  alignas(64) int16_t pair_idx[32];
  for (int c = 0; c < 16; ++c) {
    pair_idx[2 * c] = static_cast<int16_t>(c);
    pair_idx[2 * c + 1] = static_cast<int16_t>(16 + c);
  }
  const __m512i pairs = _mm512_load_si512(pair_idx);
  const __m512i byte = _mm512_set1_epi32(0xFF);
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
    __m512 scale = _mm512_setzero_ps(), minimum = _mm512_setzero_ps();
    record_scales<F>(group, areas, s, rec, scale, minimum);
#pragma GCC unroll 8
    for (int j = 0; j < S / 4; ++j) {
      __m512 v[4];
#pragma GCC unroll 4
      for (int t = 0; t < 4; ++t) {
        __m512i c = _mm512_srli_epi32(w[j], 8 * t);
        if (t < 3) c = _mm512_and_si512(c, byte);
        if constexpr (F.has_min) {
          v[t] = _mm512_fmsub_ps(scale, _mm512_cvtepi32_ps(c), minimum);
        } else {
          v[t] = _mm512_mul_ps(scale, _mm512_cvtepi32_ps(_mm512_sub_epi32(c, zero_point)));
        }
      }
      // cvtne2ps(a, b): words 0-15 from b, 16-31 from a.
      const __m512i row0 = std::bit_cast<__m512i>(_mm512_cvtne2ps_pbh(v[1], v[0]));
      const __m512i row1 = std::bit_cast<__m512i>(_mm512_cvtne2ps_pbh(v[3], v[2]));
      _mm512_storeu_si512(o + (2 * j) * 32, _mm512_permutexvar_epi16(pairs, row0));
      _mm512_storeu_si512(o + (2 * j + 1) * 32, _mm512_permutexvar_epi16(pairs, row1));
    }
    o += S * 16;
  }
}

// Accumulates `steps` 32-input steps into NT tiles of 16 activation rows: A tiles from a (the
// first row tile's first step; kBf16TileElems a step, a_tile_stride elements between row tiles),
// B tiles from b. The tile numbers are assembler text, so each tile has its own line.
template <int NT>
void accumulate(const uint16_t* b, const uint16_t* a, int64_t a_tile_stride, int64_t steps) {
  for (int64_t t = 0; t < steps; ++t) {
    const uint16_t* at = a + kBf16TileElems * t;
    _tile_loadd(6, b + kBf16TileElems * t, 64);
    _tile_loadd(4, at, 64);
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (NT > 1) {
      _tile_loadd(5, at + a_tile_stride, 64);
      _tile_dpbf16ps(1, 5, 6);
    }
    if constexpr (NT > 2) {
      _tile_loadd(4, at + 2 * a_tile_stride, 64);
      _tile_dpbf16ps(2, 4, 6);
    }
    if constexpr (NT > 3) {
      _tile_loadd(5, at + 3 * a_tile_stride, 64);
      _tile_dpbf16ps(3, 5, 6);
    }
  }
}

// The same for two groups at once (B tiles from b0 and b1) and NR (1 or 2) row tiles: tiles 0
// and 1 hold row tile 0 of the two groups, 2 and 3 row tile 1. Each A tile feeds two products,
// so a pass over the activations serves two groups (one group a pass streamed all m rows' A
// tiles from L3 once per 16 columns at prefill sizes).
template <int NR>
void accumulate_pair(const uint16_t* b0, const uint16_t* b1, const uint16_t* a,
                     int64_t a_tile_stride, int64_t steps) {
  for (int64_t t = 0; t < steps; ++t) {
    const uint16_t* at = a + kBf16TileElems * t;
    _tile_loadd(6, b0 + kBf16TileElems * t, 64);
    _tile_loadd(7, b1 + kBf16TileElems * t, 64);
    _tile_loadd(4, at, 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    if constexpr (NR > 1) {
      _tile_loadd(5, at + a_tile_stride, 64);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
}

}  // namespace

Bf16DecompressFn bf16_decompress_fn(DType t) {
  return visit_quant_format(
      t, []<QuantFormat F>() -> Bf16DecompressFn { return decompress_group<F>; },
      Bf16DecompressFn{nullptr});
}

void rows_to_bf16(const float* x, int64_t k, int64_t m, int64_t begin, int64_t end,
                  uint16_t* tiles) {
  const int64_t steps = k / 32;
  for (int64_t i = begin; i < end; ++i) {
    uint16_t* row = tiles + (i / 16) * steps * kBf16TileElems + (i % 16) * 32;
    for (int64_t t = 0; t < steps; ++t) {
      __m512i v = _mm512_setzero_si512();
      if (i < m) {
        const float* xi = x + i * k + 32 * t;
        v = std::bit_cast<__m512i>(
            _mm512_cvtne2ps_pbh(_mm512_loadu_ps(xi + 16), _mm512_loadu_ps(xi)));
      }
      _mm512_storeu_si512(row + t * kBf16TileElems, v);
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

void bf16_tiles_accumulate(const uint16_t* b, const uint16_t* a, int64_t a_tile_stride,
                           int64_t steps, int nt) {
  switch (nt) {
    case 1:
      return accumulate<1>(b, a, a_tile_stride, steps);
    case 2:
      return accumulate<2>(b, a, a_tile_stride, steps);
    case 3:
      return accumulate<3>(b, a, a_tile_stride, steps);
    default:
      return accumulate<4>(b, a, a_tile_stride, steps);
  }
}

void bf16_tiles_accumulate_pair(const uint16_t* b0, const uint16_t* b1, const uint16_t* a,
                                int64_t a_tile_stride, int64_t steps, int nr) {
  if (nr == 1) return accumulate_pair<1>(b0, b1, a, a_tile_stride, steps);
  accumulate_pair<2>(b0, b1, a, a_tile_stride, steps);
}

void bf16_tiles_store(int nt, float* c) {
  _tile_stored(0, c, 64);
  if (nt > 1) _tile_stored(1, c + 256, 64);
  if (nt > 2) _tile_stored(2, c + 512, 64);
  if (nt > 3) _tile_stored(3, c + 768, 64);
}

}  // namespace kiln::kernels
