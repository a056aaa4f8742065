// The AMX loops of contract_ceiling_bench (included there): the matrix engine's share of the
// same contract, and of the other road (bf16 weights decompressed per tile), over operands in
// L1, 16 activation rows per tile.
//   - amx_dots_only: TDPBSUD alone (tile loads of the activations and the records, two
//     groups, the int32 dots accumulated in the tiles): the int8 ceiling on the matrix engine.
//   - amx_tiles_stored: the int8 contract's tile half alone: per 32-input record a zeroed tile,
//     TDPBSUD and the tile stored to an L1 buffer (the float step needs each record's dots).
//   - amx_float_step: its vector half alone: per record and row, the stored dots converted,
//     scaled and accumulated as Q4_K's contract says (cvt, mul, fma, fnmadd).
//   - amx_contract_q4_k: both, record r's tile work issued before record r-1's float step
//     (two tiles and two buffers in turn), so that the two halves may overlap.
//   - amx_contract_q4_k_serial: both, each record's float step right after its own tile.
//   - bf16_tiles_only: TDPBF16PS alone, 2 x 2 tiles (32 rows x 32 columns) over 32-input
//     steps, the products accumulated in f32 inside the tiles: no float step at all.
//   - bf16_lut_rows<M>: the bf16 road with the weights as A, decompressed by table lookups
//     (below), at 1 row (batch-1 decode) and 32 rows.
//   - bf16_decompress_rows<M>: the bf16 road with its decompression: per 32-input step each
//     group's 16 x 32 codes become a bf16 tile (convert, scale, subtract the minimum, round to
//     bf16), then feed M / 16 row tiles. The decompression is paid once per M rows.
// GOP/s counts 2 operations per multiply-add, as the vpdpbusd loops do.
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kiln/base/amx.h"
#include "kiln/kernels/amx_tile_config.h"

namespace amx_loops {

#define KILN_AMX_TARGET \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,amx-tile,amx-int8,amx-bf16")))

constexpr int kRecords = 8;  // 32-input steps per pass
constexpr int kPasses = 64;

using kiln::kernels::load_tile_config;
using kiln::kernels::TileConfig;

struct Operands {
  alignas(64) int8_t a[kRecords][16][32];     // activation codes, 16 rows x 32 inputs
  alignas(64) uint8_t b[2][kRecords][8][64];  // two groups' records (B tiles: 8 words x 16 x 4)
  alignas(64) float scale[2][kRecords][16];
  alignas(64) float minimum[2][kRecords][16];
  alignas(64) float d[kRecords][16], ds[kRecords][16];
  alignas(64) int32_t dots[4][16][16];               // stored tiles, two or four in turn
  alignas(64) uint16_t a_bf16[kRecords][2][16][32];  // two row tiles of bf16 activations
  alignas(64) uint8_t codes[2][kRecords][16][32];    // per step and group: 16 pairs x 32 codes
  alignas(64) uint16_t b_bf16[2][16][32];            // decompressed tiles
  alignas(64) float pair_scale[2][kRecords][32], pair_min[2][kRecords][32];
};

inline Operands* make_operands() {
  auto* o = new Operands{};
  for (int r = 0; r < kRecords; ++r) {
    for (int i = 0; i < 16; ++i) {
      for (int j = 0; j < 32; ++j)
        o->a[r][i][j] = static_cast<int8_t>((r * 7 + i * 3 + j) % 255 - 127);
      o->d[r][i] = 0.01f;
      o->ds[r][i] = 0.02f;
    }
    for (int g = 0; g < 2; ++g) {
      for (int w = 0; w < 8; ++w)
        for (int x = 0; x < 64; ++x) o->b[g][r][w][x] = static_cast<uint8_t>((g + r + w + x) & 15);
      for (int c = 0; c < 16; ++c) {
        o->scale[g][r][c] = 1e-3f * static_cast<float>(1 + c);
        o->minimum[g][r][c] = 1e-4f * static_cast<float>(1 + c);
      }
      for (int p = 0; p < 16; ++p)
        for (int x = 0; x < 32; ++x)
          o->codes[g][r][p][x] = static_cast<uint8_t>((g + r + p + x) & 15);
      for (int x = 0; x < 32; ++x) {
        o->pair_scale[g][r][x] = 1e-3f * static_cast<float>(1 + x / 2);
        o->pair_min[g][r][x] = 1e-4f * static_cast<float>(1 + x / 2);
      }
    }
    for (int t = 0; t < 2; ++t)
      for (int i = 0; i < 16; ++i)
        for (int j = 0; j < 32; ++j)
          o->a_bf16[r][t][i][j] = static_cast<uint16_t>(0x3f80 + ((i + j + t) & 63));
  }
  return o;
}

// tmm0-1 and tmm5-6: 16 x 16 int32 dots (or f32 sums); tmm2: 16 rows x 32 int8 codes;
// tmm3-4: 8 x 64-byte records.
KILN_AMX_TARGET inline void configure_int8() {
  TileConfig c;
  for (int t : {0, 1, 5, 6}) c.colsb[t] = 64, c.rows[t] = 16;
  c.colsb[2] = 32, c.rows[2] = 16;
  c.colsb[3] = 64, c.rows[3] = 8;
  c.colsb[4] = 64, c.rows[4] = 8;
  load_tile_config(c);
}

// tmm0-3: 2 x 2 f32 tiles; tmm4-5: 16 rows x 32 bf16; tmm6-7: 16 pairs x 16 columns of bf16.
// Every bf16 loop starts so: configured, its accumulators tmm0-3 zeroed.
KILN_AMX_TARGET inline void start_bf16_loop() {
  TileConfig c;
  for (int t = 0; t < 8; ++t) c.colsb[t] = 64, c.rows[t] = 16;
  load_tile_config(c);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
}

KILN_AMX_TARGET inline float amx_dots_only(Operands& o) {
  configure_int8();
  _tile_zero(0);
  _tile_zero(1);
  for (int p = 0; p < kPasses; ++p)
    for (int r = 0; r < kRecords; ++r) {
      _tile_loadd(2, o.a[r], 32);
      _tile_loadd(3, o.b[0][r], 64);
      _tile_loadd(4, o.b[1][r], 64);
      _tile_dpbsud(0, 2, 3);
      _tile_dpbsud(1, 2, 4);
    }
  _tile_stored(0, o.dots[0], 64);
  _tile_release();
  return static_cast<float>(o.dots[0][3][5]);
}

// Per 32-input record, group 0: the tile half (dots stored to buffer `buf`).
#define KILN_AMX_RECORD_TILES(r, ca, buf) \
  do {                                    \
    _tile_zero(ca);                       \
    _tile_loadd(2, o.a[r], 32);           \
    _tile_loadd(3, o.b[0][r], 64);        \
    _tile_dpbsud(ca, 2, 3);               \
    _tile_stored(ca, o.dots[buf], 64);    \
  } while (0)

// The float step of group 0's 16 rows for record r from a stored tile: Q4_K's contract.
KILN_AMX_TARGET inline void float_step(const Operands& o, int r, int buf, __m512* acc) {
  const __m512 scale = _mm512_load_ps(o.scale[0][r]);
  const __m512 minimum = _mm512_load_ps(o.minimum[0][r]);
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) {
    const __m512 dots = _mm512_cvtepi32_ps(_mm512_load_si512(o.dots[buf][i]));
    acc[i] = _mm512_fmadd_ps(dots, _mm512_mul_ps(scale, _mm512_set1_ps(o.d[r][i])), acc[i]);
    acc[i] = _mm512_fnmadd_ps(minimum, _mm512_set1_ps(o.ds[r][i]), acc[i]);
  }
}

KILN_AMX_TARGET inline float sum_acc(const __m512* acc) {
  __m512 s = _mm512_setzero_ps();
  for (int i = 0; i < 16; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}

// The contract loops run one group of 16 columns (16 f32 accumulators in registers).
KILN_AMX_TARGET inline float amx_tiles_stored(Operands& o) {
  configure_int8();
  for (int p = 0; p < kPasses; ++p)
    for (int r = 0; r < kRecords; ++r) KILN_AMX_RECORD_TILES(r, 0, r & 1);
  _tile_release();
  return static_cast<float>(o.dots[0][1][2]);
}

KILN_AMX_TARGET inline float amx_float_step(Operands& o) {
  __m512 acc[16];
  for (auto& a : acc) a = _mm512_setzero_ps();
  for (int p = 0; p < kPasses; ++p) {
    for (int r = 0; r < kRecords; ++r) float_step(o, r, r & 1, acc);
    __asm__ volatile("" ::: "memory");
  }
  return sum_acc(acc);
}

KILN_AMX_TARGET inline float amx_contract_q4_k_serial(Operands& o) {
  configure_int8();
  __m512 acc[16];
  for (auto& a : acc) a = _mm512_setzero_ps();
  for (int p = 0; p < kPasses; ++p)
    for (int r = 0; r < kRecords; ++r) {
      KILN_AMX_RECORD_TILES(r, 0, 0);
      float_step(o, r, 0, acc);
    }
  _tile_release();
  return sum_acc(acc);
}

KILN_AMX_TARGET inline float amx_contract_q4_k(Operands& o) {
  configure_int8();
  __m512 acc[16];
  for (auto& a : acc) a = _mm512_setzero_ps();
  for (int p = 0; p < kPasses; ++p) {
    KILN_AMX_RECORD_TILES(0, 0, 0);
    for (int r = 1; r < kRecords; r += 2) {
      KILN_AMX_RECORD_TILES(r, 5, 1);
      float_step(o, r - 1, 0, acc);
      if (r + 1 < kRecords) KILN_AMX_RECORD_TILES(r + 1, 0, 0);
      float_step(o, r, 1, acc);
    }
  }
  _tile_release();
  return sum_acc(acc);
}

// Four tiles and buffers in turn: record r's tile work issued three records before its float
// step, so that the tile chain's latency (loads, TDPBSUD, store) has three float steps to hide in.
KILN_AMX_TARGET inline float amx_contract_q4_k_deep(Operands& o) {
  configure_int8();
  __m512 acc[16];
  for (auto& a : acc) a = _mm512_setzero_ps();
  static_assert(kRecords % 4 == 0);
  for (int p = 0; p < kPasses; ++p) {
    KILN_AMX_RECORD_TILES(0, 0, 0);
    KILN_AMX_RECORD_TILES(1, 1, 1);
    KILN_AMX_RECORD_TILES(2, 5, 2);
    for (int r = 0; r < kRecords; r += 4) {
      if (r + 3 < kRecords) KILN_AMX_RECORD_TILES(r + 3, 6, 3);
      float_step(o, r, 0, acc);
      if (r + 4 < kRecords) KILN_AMX_RECORD_TILES(r + 4, 0, 0);
      float_step(o, r + 1, 1, acc);
      if (r + 5 < kRecords) KILN_AMX_RECORD_TILES(r + 5, 1, 1);
      float_step(o, r + 2, 2, acc);
      if (r + 6 < kRecords) KILN_AMX_RECORD_TILES(r + 6, 5, 2);
      float_step(o, r + 3, 3, acc);
    }
  }
  _tile_release();
  return sum_acc(acc);
}

KILN_AMX_TARGET inline float bf16_tiles_only(Operands& o) {
  start_bf16_loop();
  for (int p = 0; p < kPasses; ++p)
    for (int r = 0; r < kRecords; ++r) {
      _tile_loadd(4, o.a_bf16[r][0], 64);
      _tile_loadd(5, o.a_bf16[r][1], 64);
      _tile_loadd(6, o.b_bf16[0], 64);
      _tile_loadd(7, o.b_bf16[1], 64);
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  _tile_stored(0, o.dots[0], 64);
  _tile_release();
  return static_cast<float>(o.dots[0][2][3]);
}

// One group's 16 columns x 32 inputs of step r as a bf16 tile: code * scale - minimum, rounded
// to bf16 (16 rows of 16 pairs).
KILN_AMX_TARGET inline void decompress(Operands& o, int g, int r, uint16_t (*out)[32]) {
  const __m512 scale = _mm512_load_ps(o.pair_scale[g][r]);
  const __m512 scale_hi = _mm512_load_ps(o.pair_scale[g][r] + 16);
  const __m512 minimum = _mm512_load_ps(o.pair_min[g][r]);
  const __m512 minimum_hi = _mm512_load_ps(o.pair_min[g][r] + 16);
#pragma GCC unroll 16
  for (int p = 0; p < 16; ++p) {
    const __m128i* c = reinterpret_cast<const __m128i*>(o.codes[g][r][p]);
    const __m512 lo = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_load_si128(c)));
    const __m512 hi = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_load_si128(c + 1)));
    const __m512bh w = _mm512_cvtne2ps_pbh(_mm512_fmsub_ps(hi, scale_hi, minimum_hi),
                                           _mm512_fmsub_ps(lo, scale, minimum));
    _mm512_store_si512(out[p], reinterpret_cast<const __m512i&>(w));
  }
}

// M rows: M / 16 row tiles per decompressed tile. M = 32: two groups (2 x 2 tiles); M = 64: one
// group, four row tiles.
template <int M>
KILN_AMX_TARGET inline float bf16_decompress_rows(Operands& o) {
  static_assert(M == 32 || M == 64);
  start_bf16_loop();
  for (int p = 0; p < kPasses; ++p)
    for (int r = 0; r < kRecords; ++r) {
      decompress(o, 0, r, o.b_bf16[0]);
      if constexpr (M == 32) decompress(o, 1, r, o.b_bf16[1]);
      __asm__ volatile("" ::: "memory");  // the tile loads read what the stores wrote
      _tile_loadd(6, o.b_bf16[0], 64);
      if constexpr (M == 32) {
        _tile_loadd(7, o.b_bf16[1], 64);
        _tile_loadd(4, o.a_bf16[r][0], 64);
        _tile_loadd(5, o.a_bf16[r][1], 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      } else {
        _tile_loadd(4, o.a_bf16[r][0], 64);
        _tile_loadd(5, o.a_bf16[r][1], 64);
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 5, 6);
        _tile_loadd(4, o.a_bf16[(r + 1) % kRecords][0], 64);
        _tile_loadd(5, o.a_bf16[(r + 1) % kRecords][1], 64);
        _tile_dpbf16ps(2, 4, 6);
        _tile_dpbf16ps(3, 5, 6);
      }
    }
  _tile_stored(0, o.dots[0], 64);
  _tile_release();
  return static_cast<float>(o.dots[0][2][3]);
}

// The bf16 road with the weights as the A tile (rows = 16 output columns, 32 inputs each) and the
// activations as B, so that a row's decompression is one lookup in its column's table of 16
// bf16 values (code * scale - minimum for codes 0..15, built per column and step: one fmsub and
// one rounding) by vpermw: per 32 weights a widening load, the lookup and a store. M = 1 is
// batch-1 decode (one row of the tile used: the decompression paid per row), M = 32 two row
// tiles. GOP/s counts only the M rows' products.
template <int M>
KILN_AMX_TARGET inline float bf16_lut_rows(Operands& o) {
  static_assert(M == 1 || M == 32);
  start_bf16_loop();
  alignas(64) uint16_t weights[16][32];
  const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  for (int p = 0; p < kPasses; ++p)
    for (int r = 0; r < kRecords; ++r) {
#pragma GCC unroll 16
      for (int c = 0; c < 16; ++c) {
        const __m512 v = _mm512_fmsub_ps(iota, _mm512_set1_ps(o.scale[0][r][c]),
                                         _mm512_set1_ps(o.minimum[0][r][c]));
        const __m512i table = _mm512_castsi256_si512(
            reinterpret_cast<const __m256i&>(static_cast<const __m256bh&>(_mm512_cvtneps_pbh(v))));
        const __m512i idx = _mm512_cvtepu8_epi16(
            _mm256_load_si256(reinterpret_cast<const __m256i*>(o.codes[0][r][c])));
        _mm512_store_si512(weights[c], _mm512_permutexvar_epi16(idx, table));
      }
      __asm__ volatile("" ::: "memory");  // the tile load reads what the stores wrote
      _tile_loadd(4, weights, 64);
      _tile_loadd(6, o.a_bf16[r][0], 64);
      _tile_dpbf16ps(0, 4, 6);
      if constexpr (M == 32) {
        _tile_loadd(7, o.a_bf16[r][1], 64);
        _tile_dpbf16ps(1, 4, 7);
      }
    }
  _tile_stored(0, o.dots[0], 64);
  _tile_release();
  return static_cast<float>(o.dots[0][2][3]);
}

}  // namespace amx_loops
