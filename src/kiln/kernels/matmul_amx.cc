// AMX tile kernels for quantized weights from kAmxMinRows rows: the contract's int32 dots of 16
// activation rows x 16 columns x one 32-input sub-block by one TDPBSUD (activations as the signed
// A tile, the 8-bit records as the unsigned B tile: a record's 8 words of 16 columns x 4 bytes
// are already a B tile's rows; zero-point formats' expanded records signed, by TDPBSSD), then the
// contract's float step on the AVX-512 units. The tile products sum in int32 exactly, so the dots,
// and with the same float operations in the same order the outputs, are bit-identical to every
// other tier (matmul_kernels.h).
//
// The float step needs each sub-block's dots in vector registers: the tile is stored to an L1
// buffer and its 16 rows loaded back. Two tiles and two buffers take turns, so that the tile
// work of sub-block s is issued before the float step of s - 1 and the two may overlap
// (bench/contract_ceiling_bench measures both halves and the overlap).
#include <immintrin.h>

// GCC 12 flags its own _mm512_cvtepi32_ps (an intentionally undefined register, bug 105593).
#if defined(__GNUC__) && !defined(__clang__)  // clang has no -Wmaybe-uninitialized
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "kiln/kernels/amx_tile_config.h"
#include "kiln/kernels/matmul_kernels.h"
#include "kiln/kernels/quant_format.h"

namespace kiln::kernels {
namespace {

// How far ahead of the record being read a group read where it is stored is prefetched (as
// matmul_avx512.cc's kernels do).
constexpr int kPrefetchBytes = 2048;

// One configuration for every format (32-input records only: see amx_tiles_for), loaded once
// per thread: tmm0-1 hold 16 x 16 int32 dots (taking turns), tmm2 a sub-block's A (16 rows x 32
// activation codes), tmm3 its B (a record's 8 words).
TileConfig int8_tile_config() {
  TileConfig c;
  c.colsb[0] = c.colsb[1] = 64;
  c.rows[0] = c.rows[1] = 16;
  c.colsb[2] = 32, c.rows[2] = 16;
  c.colsb[3] = 64, c.rows[3] = 8;
  return c;
}

void configure_tiles() {
  static const TileConfig config = int8_tile_config();
  use_tile_config(TileConfigId::Int8, config);
}

// The dots of one sub-block for rows row0 .. row0 + 15 into dots (16 x 16 int32), through tile C
// (0 or 1): qs the rows' 32 codes (32 bytes apart), rec the record. Rows past the view's last
// are whatever the scratch holds there (the driver pads it); their outputs are never stored.
// Signed: the record holds code - zero_point as int8 (TDPBSSD), else unsigned codes (TDPBSUD).
// (The tile intrinsics are assembler text: the tile numbers must be literals.)
#define KILN_SUB_BLOCK_DOTS(C) \
  do {                         \
    _tile_zero(C);             \
    _tile_loadd(2, qs, 32);    \
    _tile_loadd(3, rec, 64);   \
    if constexpr (Signed) {    \
      _tile_dpbssd(C, 2, 3);   \
    } else {                   \
      _tile_dpbsud(C, 2, 3);   \
    }                          \
    _tile_stored(C, dots, 64); \
  } while (0)

template <int C, bool Signed>
inline void sub_block_dots(const int8_t* qs, const uint8_t* rec, int32_t* dots) {
  if constexpr (C == 0) {
    KILN_SUB_BLOCK_DOTS(0);
  } else {
    KILN_SUB_BLOCK_DOTS(1);
  }
}
#undef KILN_SUB_BLOCK_DOTS

// A format's tiles for 32-input records. Signed: records of code - ZP (no correction); else
// unsigned codes, corrected by -ZP * sum(q) (Q8_0 as stored), or with a minimum (Min).
template <int ZP, bool Min, bool F16Scale, bool Signed>
struct AmxTile {
  static constexpr int kCodeBytes = 16 * 32;
  static constexpr int kRecordBytes = kCodeBytes + (F16Scale ? 32 : 64) + (Min ? 64 : 0);

  // The float step of sub-block s: acc[i] for rows row0 + i, i = 0..15, from its stored dots.
  static inline void float_step(const uint8_t* group, const ActView& a, int64_t row0, int64_t s,
                                const int32_t* dots, __m512* acc) {
    const uint8_t* rec = group + s * kRecordBytes;
    const int64_t at = s * a.m + row0;  // the rows' entries of block s
    __m512 scale;
    if constexpr (F16Scale) {
      scale =
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + kCodeBytes)));
    } else {
      scale = _mm512_loadu_ps(rec + kCodeBytes);
    }
    const float* db = a.d + at;
    __m512 minimum = _mm512_setzero_ps();
    if constexpr (Min) minimum = _mm512_loadu_ps(rec + kCodeBytes + 64);
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) {
      __m512i dot = _mm512_load_si512(dots + 16 * i);
      // -zp * sum(q) of the sub-block, added to the dot in int32 (exact, as every tier).
      if constexpr (!Min && !Signed)
        dot = _mm512_add_epi32(dot, _mm512_set1_epi32(a.zp_corr[zp_slot(ZP)][at + i]));
      acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(scale, _mm512_set1_ps(db[i])),
                               acc[i]);
      // The minimum times the contract's d_b * sum of the block's codes (ds).
      if constexpr (Min) acc[i] = _mm512_fnmadd_ps(minimum, _mm512_set1_ps(a.ds[at + i]), acc[i]);
    }
  }

  // TileFn: 16 rows are computed (mt of them valid), all 16 stored to `tile`. With Prefetch
  // (the first row tile of a group read where it is stored, not from an expanded copy in cache)
  // the records are asked for kPrefetchBytes ahead, as the vector kernels' first tiles do.
  template <bool Prefetch>
  static void fn(const uint8_t* group, const ActView& a, int64_t row0, int /*mt*/, float* tile) {
    configure_tiles();
    const int64_t nsub = a.k / 32;
    alignas(64) int32_t dots[2][16 * 16];
    __m512 acc[16];
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_setzero_ps();
    auto codes = [&](int64_t s) { return a.q + (s * a.m + row0) * 32; };
    auto record = [&](int64_t s) {
      const uint8_t* rec = group + s * kRecordBytes;
      if constexpr (Prefetch) {
#pragma GCC unroll 16
        for (int l = 0; l < kRecordBytes; l += 64)
          _mm_prefetch(reinterpret_cast<const char*>(rec + kPrefetchBytes + l), _MM_HINT_T0);
      }
      return rec;
    };
    sub_block_dots<0, Signed>(codes(0), record(0), dots[0]);
    int64_t s = 1;
    for (; s + 1 < nsub; s += 2) {
      sub_block_dots<1, Signed>(codes(s), record(s), dots[1]);
      float_step(group, a, row0, s - 1, dots[0], acc);
      sub_block_dots<0, Signed>(codes(s + 1), record(s + 1), dots[0]);
      float_step(group, a, row0, s, dots[1], acc);
    }
    if (s < nsub) {
      sub_block_dots<1, Signed>(codes(s), record(s), dots[1]);
      float_step(group, a, row0, s - 1, dots[0], acc);
      float_step(group, a, row0, s, dots[1], acc);
    } else {
      float_step(group, a, row0, s - 1, dots[0], acc);
    }
#pragma GCC unroll 16
    for (int i = 0; i < 16; ++i) _mm512_store_ps(tile + 16 * i, acc[i]);
  }
};

}  // namespace

AmxTiles amx_tiles_for(DType t) {
  return visit_quant_format(
      t,
      []<QuantFormat F>() -> AmxTiles {
        // 16-input records measured slower than the AVX-512 pair kernels (bench/matmul_bench:
        // a K=16 TDPBSUD costs what a K=64 one does, and the float step comes twice per 32
        // inputs): those formats stay on AVX-512.
        if constexpr (F.sub_block != 32) {
          return {};
        } else if constexpr (F.bits == 8 && !F.expand_for_many_rows) {
          // Records as the AVX-512 many-row path reads them: 8-bit ones as stored...
          using K = AmxTile<F.zero_point, F.has_min, true, false>;
          return {K::template fn<true>, K::template fn<false>, false};
        } else {
          // ... the others as expand_group writes them, in cache: minus the zero point where
          // there is one, which saves the float step its correction (a quarter of its vector
          // work per row and record).
          constexpr bool kSigned = F.zero_point != 0 && !F.has_min;
          using K = AmxTile<F.zero_point, F.has_min, expanded_keeps_f16_scales(F), kSigned>;
          return {K::template fn<false>, K::template fn<false>, kSigned};
        }
      },
      AmxTiles{});
}

}  // namespace kiln::kernels
