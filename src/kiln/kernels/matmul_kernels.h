// Internal interface between the matmul driver (matmul.cc: threading, activation scratch,
// epilogues) and the per-ISA tile kernels (matmul_scalar.cc, matmul_avx2.cc, matmul_avx512.cc).
//
// THE ARITHMETIC CONTRACT (what makes every tier and every batch shape bit-identical):
// activations are quantized per 32 inputs to int8 with d = amax / 127 and q = round_even(x * 127
// / amax) clamped to [-127, 127] (an out-of-range or NaN product converts to INT32_MIN as on
// x86, then clamps); for each sub-block s of S inputs, in order, an output accumulates
//   dot  = sum(code * q) - zp * sum(q)                (exact, int32)
//   acc  = fma(float(dot), scale_s * d_b, acc)        (b: the 32-input block containing s)
//   acc  = fma(-min_s, d_b * float(sumS(q)), acc)     (types with a minimum only)
// starting from acc = 0, where sumS is the sum of the sub-block's S activation codes (ActView's
// precomputed ds = d_b * float(s32) for S = 32; d_b * float(s16) for Q2_K's 16-input sub-blocks,
// the same one f32 multiply on every tier). Lookup-table formats' codes are their table values
// + 128 with zero point 128 (quant_format.h): dot is the plain sum(table[index] * q). Float
// weights: acc = fma(x_k, w_k, acc) for k = 0..K-1 in order. Each output element sees only its own
// weight row and activation row, in this fixed order, whatever tile, thread or batch it is computed
// in.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kiln/base/dtype.h"
#include "kiln/kernels/quant_format.h"

namespace kiln::kernels {

// Where ActView::zp_corr keeps the correction for zero point zp; -1 for one no type has.
constexpr int zp_slot(int zp) {
  return zp == 8 ? 0 : zp == 16 ? 1 : zp == 32 ? 2 : zp == 128 ? 3 : zp == 4 ? 4 : -1;
}
inline constexpr int kZeroPointSlots = 5;
// Inputs per correction of a slot: 16 for zero points 32 (Q6_K) and 4 (Q3_K), else 32.
constexpr int zp_sub_block(int slot) { return slot == 2 || slot == 4 ? 16 : 32; }

// Activation rows as the tile kernels read them (views into the caller's scratch). The
// quantized arrays are BLOCK-MAJOR: for each 32-input block, the m rows' entries are adjacent,
// so a tile of rows row0.. reads every row's codes and scales at constant offsets from one
// pointer (a handful of registers however tall the tile is).
//
// With slab_rows > 0 (the AVX2 many-row path, matmul_gemm_avx2.cc; AVX-512 above kMaxTileRows
// rows, each tile reading the view of its slab) the rows are instead cut into
// slabs of slab_rows consecutive rows (the last may be shorter), each block-major on its own and
// stored one after the other: slab(row0) is the view of one slab, whose arrays the kernels
// stream sequentially (with all m rows block-major, consecutive blocks of a 4-row tile lie 32 m
// bytes apart: a new 4 KiB page every block or two at m = 512, which measured 2x slower).
struct ActView {
  int64_t k = 0;
  int64_t m = 0;                 // rows held (the block stride of the arrays below)
  int64_t slab_rows = 0;         // 0: all m rows block-major; else see above
  const int8_t* q = nullptr;     // [k/32][m][32] int8 codes
  const float* d = nullptr;      // [k/32][m] scales
  const int32_t* s16 = nullptr;  // [k/16][m] code sums per 16
  const int32_t* s32 = nullptr;  // [k/32][m] code sums per 32
  const float* ds = nullptr;     // [k/32][m] d * float(s32)
  const float* x = nullptr;      // [m][x_stride] the f32 rows (float weights read them directly)
  int64_t x_stride = 0;
  // Under the bf16 contract (quantized weights): the rows rounded to bf16 as A tiles
  // (rows_to_bf16), and nothing above but x; else null.
  const uint16_t* xb = nullptr;
  // -zp * sum(q) per sub-block, [k/S][m], for each zero point the weight's segments use (index
  // zp_slot(zp); S = zp_sub_block(slot)); null for the others. The
  // same integers the kernels would compute per row and sub-block, computed once per matmul
  // (the AVX-512 kernel broadcasts them straight from memory).
  const int32_t* zp_corr[kZeroPointSlots] = {};

  // Codes of `row` for inputs k0 .. k0 + 15 (k0 a multiple of 16; the next 16 follow when k0 is
  // a multiple of 32).
  const int8_t* q_at(int64_t row, int64_t k0) const {
    return q + ((k0 / 32) * m + row) * 32 + k0 % 32;
  }
  float d_at(int64_t row, int64_t blk) const { return d[blk * m + row]; }
  float ds_at(int64_t row, int64_t blk) const { return ds[blk * m + row]; }
  int32_t s32_at(int64_t row, int64_t blk) const { return s32[blk * m + row]; }
  int32_t s16_at(int64_t row, int64_t sub) const { return s16[sub * m + row]; }

  // The slab starting at row0 (a multiple of slab_rows > 0) as a block-major view of its rows.
  ActView slab(int64_t row0) const {
    ActView v = *this;
    v.slab_rows = 0;
    v.m = m - row0 < slab_rows ? m - row0 : slab_rows;
    v.q = q + row0 * k;
    v.d = d + row0 * (k / 32);
    v.s16 = s16 + row0 * (k / 16);
    v.s32 = s32 + row0 * (k / 32);
    v.ds = ds + row0 * (k / 32);
    v.x = x + row0 * x_stride;
    for (int slot = 0; slot < kZeroPointSlots; ++slot)
      if (zp_corr[slot] != nullptr)
        v.zp_corr[slot] = zp_corr[slot] + row0 * (k / zp_sub_block(slot));
    return v;
  }
};

// Rows a tile kernel handles in one pass over a group's weights.
inline constexpr int kMaxTileRows = 8;

// Computes tile[i * 16 + r] for activation rows row0 .. row0 + mt - 1 (mt in 1..kMaxTileRows)
// and the 16 rows (output columns) of one packed group.
using TileFn = void (*)(const uint8_t* group, const ActView& a, int64_t row0, int mt, float* tile);

// Rows of an AMX tile (matmul_amx.cc), used from kAmxMinRows rows where amx_active(): the
// activations are then in slabs of this many rows (ActView::slab_rows), and a tile reads 16
// rows from its slab's start whatever the slab's height, so the driver pads every activation
// array by kActOverreadBytes.
inline constexpr int kAmxTileRows = 16;
// Below this many rows the AVX-512 kernels stay: at 32 rows AMX measured 0.88-1.09x by shape
// (bench/matmul_bench, Q4_K, Q5_0, Q8_0), from 128 rows 1.2-1.34x.
inline constexpr int64_t kAmxMinRows = 33;
inline constexpr size_t kActOverreadBytes = 1024;
// The AMX kernels of a quantized type's 8-bit records (as stored for Q8_0, as expand_group wrote
// them for the others): TileFns that compute and store all 16 rows (mt of them valid) of a
// 16-row tile, `first` for a group's first row tile (it prefetches records read where they are
// stored). Null for float types and for formats of 16-input records, which stay on AVX-512.
// Call only where amx_active().
struct AmxTiles {
  TileFn first = nullptr;
  TileFn rest = nullptr;
  // The tiles read expanded codes minus the zero point (ExpandedTiles::expand_signed), where the
  // format has one and is expanded; else the records the pair kernels read.
  bool signed_codes = false;
};
AmxTiles amx_tiles_for(DType t);
// Matmuls in which a thread ran AMX tiles, in this process, counted once per thread and matmul:
// how tests tell that the AMX path ran.
int64_t amx_matmuls_run();

// THE BF16 CONTRACT's pieces (matmul_bf16_amx.cc; base/amx.h says what the contract is). Call
// only where bf16_contract_active().
//
// Bytes of one 32-input step of a group decompressed: one B tile of 16 input pairs x 16 columns
// x 2 bf16 (the pair 2p, 2p + 1 of column c at dword p * 16 + c).
inline constexpr int64_t kBf16StepBytes = 1024;
// Writes records [s0, s1) of a packed group of k inputs, as B tiles from out: each weight the
// value PackedWeight::dequantize_row gives, rounded to bf16 (nearest even).
using Bf16DecompressFn = void (*)(const uint8_t* group, int64_t k, int64_t s0, int64_t s1,
                                  uint16_t* out);
Bf16DecompressFn bf16_decompress_fn(DType t);  // null for float types
// Elements of one A or B tile (16 rows x 32 bf16).
inline constexpr int64_t kBf16TileElems = 512;
// Rows [begin, end) of the activations as A tiles: row i's inputs 32t .. 32t + 31, rounded to
// bf16 (nearest even), at tiles[((i / 16) * (k / 32) + t) * kBf16TileElems + (i % 16) * 32];
// rows from m on are zeros (x holds m rows of k; k a multiple of 32).
void rows_to_bf16(const float* x, int64_t k, int64_t m, int64_t begin, int64_t end,
                  uint16_t* tiles);
// The tile accumulators of up to 4 x 16 activation rows (nt tiles): zeroed, then `steps` steps
// added (A: the first row tile's step at a, the next row tiles a_tile_stride elements on; B:
// steps decompressed tiles from b), then stored to c (nt x 16 rows x 16 f32). They stay in the
// tile registers between the calls: one thread runs the three in turn, with no other tile work
// between them.
void bf16_tiles_zero(int nt);
void bf16_tiles_accumulate(const uint16_t* b, const uint16_t* a, int64_t a_tile_stride,
                           int64_t steps, int nt);
// Two groups at once for nr (1 or 2) row tiles: tile 2r + h is row tile r of group h (B from
// b0, b1); stored by bf16_tiles_store(2 * nr, c) in that order.
void bf16_tiles_accumulate_pair(const uint16_t* b0, const uint16_t* b1, const uint16_t* a,
                                int64_t a_tile_stride, int64_t steps, int nr);
void bf16_tiles_store(int nt, float* c);
inline constexpr int kBf16MaxTiles = 4;
// Matmuls in which a thread ran the bf16 contract's tiles, counted as amx_matmuls_run counts.
int64_t bf16_matmuls_run();

// Rows of a pair tile (below): 2 groups x 4 rows keep 8 int32 dots and 8 f32 accumulators in
// registers, like an 8-row tile of one group.
inline constexpr int kPairTileRows = 4;

// Computes the tiles of two groups with 8-bit records at once, for rows row0 .. row0 + mt - 1
// (mt in 1..kPairTileRows): tile0 for group0, tile1 for group1, as a TileFn computes each. Each
// broadcast activation word feeds two vpdpbusd instead of one (32 broadcast loads per 64 dot
// instructions instead of 64). Same integer dots and float operations, so the same bits.
//
// `next` names bytes the kernel pulls into L2 as it goes: at its record s, [begin + s *
// per_record, begin + (s + 1) * per_record), up to end. The driver points each row tile at a
// share of the thread's next pair of groups, so that their memory traffic overlaps this pair's
// arithmetic. Without it the pair kernel measured slower than 8-row tiles of one group: its
// first row tile waits for two groups from DRAM while the others compute from L1.
struct TilePrefetch {
  const uint8_t* begin = nullptr;
  const uint8_t* end = nullptr;
  int64_t per_record = 0;  // a multiple of 64
};
using PairTileFn = void (*)(const uint8_t* group0, const uint8_t* group1, const ActView& a,
                            int64_t row0, int mt, const TilePrefetch& next, float* tile0,
                            float* tile1);

// Quantizes one activation row of k inputs (k a multiple of 32) as the contract says, into the
// block-major arrays: the pointers address the row's entries of block 0, and block b's entries
// are `stride` rows further (q: q[b * stride * 32 + j], d[b * stride], s16[(2b + h) * stride]).
using QuantizeRowFn = void (*)(const float* x, int64_t k, int64_t stride, int8_t* q, float* d,
                               int32_t* s16, int32_t* s32, float* ds);

// Bit i set: row i of a tile (mt <= 64 rows of 16 floats) holds a value greater than best[i]
// (NaN compares false). matmul_argmax's epilogue skips every other row.
using RowsAboveFn = uint64_t (*)(const float* tile, int mt, const float* best);
uint64_t rows_above_avx512(const float* tile, int mt, const float* best);

TileFn tile_fn_scalar(DType t);
TileFn tile_fn_avx2(DType t);
TileFn tile_fn_avx512(DType t);
// The pair kernel of an 8-bit type's records as stored (Q8_0); null for every other type.
PairTileFn pair_tile_fn_avx512(DType t);

// A group read by several row tiles can be unpacked once: `expand` rewrites a group of a 2- to
// 6-bit type with 8-bit codes (S/4 vectors of 64 bytes per record, as Q8_0 stores them)
// followed by the record's own scale (and minimum) bytes, and `tile` reads that layout with
// the type's zero point, scales and order: the same integer dots and the same float
// operations, so the same bits; `pair` reads two expanded groups at once. All null where a
// type or ISA has no such form.
struct ExpandedTiles {
  void (*expand)(const uint8_t* group, int64_t k, uint8_t* out) = nullptr;
  // The same records with code - zero_point as int8 (zero-point formats only; AMX reads them).
  void (*expand_signed)(const uint8_t* group, int64_t k, uint8_t* out) = nullptr;
  TileFn tile = nullptr;
  PairTileFn pair = nullptr;
  size_t record_bytes = 0;  // expanded bytes per sub-block record
  int sub_block = 0;        // inputs per record
};
ExpandedTiles expanded_tiles_avx512(DType t);

// The AVX2 form for many rows (from 2 rows, matmul.cc many_row_tiles; matmul_gemm_avx2.cc), where
// every slab of kChunkSlabRows rows reads each group: a group's records are taken in chunks of
// consecutive records. `first` is the first slab's pass over records [s0, s1) of the packed
// `group` (k inputs); for `expanded` types (2- to 6-bit codes) it also asks for the packed
// bytes ahead and writes the records to `out` as 8-bit codes with f32 scales (and minimums),
// record_bytes each; `tile` then reads them there for every other slab (Q8_0's records are read
// in place: at group + s0 * record_bytes). Both ADD records [s0, s1) to the f32 accumulators
// acc[16 i + c] of rows row0 .. row0 + mt - 1 (mt up to kChunkSlabRows for `first`, any for
// `tile`), which hold the sum over records [0, s0) (zeros for s0 = 0). Chunk after chunk that is
// the contract's accumulation, in order: the same bits. Null members where a type has no such
// form (float weights).
struct ChunkTiles {
  void (*first)(const uint8_t* group, int64_t k, const ActView& a, int64_t s0, int64_t s1,
                int64_t row0, int mt, float* acc, uint8_t* out) = nullptr;
  void (*tile)(const uint8_t* records, const ActView& a, int64_t s0, int64_t s1, int64_t row0,
               int mt, float* acc) = nullptr;
  bool expanded = false;    // `first` writes the records to `out` for `tile`
  size_t record_bytes = 0;  // bytes per record as `tile` reads them
  int sub_block = 0;        // inputs per record
};
ChunkTiles chunk_tiles_avx2(DType t);
// Rows of one activation slab on that path (ActView::slab_rows): the tiles' sub-tile height.
inline constexpr int64_t kChunkSlabRows = 4;
// Bytes of expanded records one chunk holds (a per-thread buffer on the stack): the whole
// group up to K = 6528 inputs of a 4- or 5-bit K-quant (640 bytes per 32 inputs).
inline constexpr size_t kChunkBufferBytes = 128 * 1024;
void quantize_row_scalar(const float* x, int64_t k, int64_t stride, int8_t* q, float* d,
                         int32_t* s16, int32_t* s32, float* ds);
void quantize_row_avx2(const float* x, int64_t k, int64_t stride, int8_t* q, float* d, int32_t* s16,
                       int32_t* s32, float* ds);
void quantize_row_avx512(const float* x, int64_t k, int64_t stride, int8_t* q, float* d,
                         int32_t* s16, int32_t* s32, float* ds);

}  // namespace kiln::kernels
