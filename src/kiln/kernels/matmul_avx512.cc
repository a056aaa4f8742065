// AVX-512 tile kernels: int8 dot products with AVX512_VNNI (vpdpbusd: 16 output columns x 4
// inputs per instruction) for quantized weights, FMA for float weights. Bit-identical to
// matmul_scalar.cc (same integer dots, same float operations in the same order).
#include <immintrin.h>

// GCC 12 flags its own _mm512_reduce_* helpers (an intentionally undefined register).
#if defined(__GNUC__) && !defined(__clang__)  // clang has no -Wmaybe-uninitialized
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <algorithm>
#include <cstring>

#include "kiln/base/error.h"
#include "kiln/kernels/matmul_avx512_codes.h"
#include "kiln/kernels/matmul_kernels.h"
#include "kiln/kernels/packed_weight.h"

namespace kiln::kernels {
namespace {

// How far ahead of the record being read the weight stream is prefetched (about the bytes one
// core must keep in flight to cover DRAM latency at its share of the bandwidth).
constexpr int kPrefetchBytes = 2048;
// Split-scale types (the K-quants) also ask for the stream this far ahead into L2. Their groups
// are records and then four scale areas, so the stream jumps at every group's end, and the
// hardware's prefetchers, which follow it within a group, lost each group's start: a 1-row
// Q4_K tile read 11-16 GB/s with one thread on 1024- to 4096-input weights against 21 GB/s on
// 16384-input ones, the same bytes in 16x fewer groups.
constexpr int kFarPrefetchBytes = 16384;

using avx512::e8m0_16;
using avx512::load_codes;
using avx512::load_i32;
using avx512::split_min16;
using avx512::split_scale16;
using avx512::table_codes;

// Where a record's scales (and minimums) are: an f16 scale (and minimum: Q4_1, Q5_1) per row in
// the record (Q4_0, Q5_0, Q8_0, IQ4_NL), an e8m0 byte per row in the record (MXFP4), f32 scale
// and minimum per row in the record (groups expand_group rewrote), or as factors after the
// group's records (K-quants and IQ4_XS as packed; packed_weight.h).
enum class ScaleAt { F16InRecord, E8M0InRecord, F32InRecord, Split };

template <ScaleAt At, bool Min>
constexpr int record_tail_bytes() {
  switch (At) {
    case ScaleAt::F16InRecord:
      return 32 + (Min ? 32 : 0);
    case ScaleAt::E8M0InRecord:
      return 16;
    case ScaleAt::F32InRecord:
      return 64 + (Min ? 64 : 0);
    default:
      return 0;
  }
}

// Where a format's records keep their scales as packed.
template <QuantFormat F>
constexpr ScaleAt packed_scale_at() {
  if (F.split_scales) return ScaleAt::Split;
  return F.record_scale == RecordScale::E8M0 ? ScaleAt::E8M0InRecord : ScaleAt::F16InRecord;
}

// The contract's d_b * sum of a sub-block's activation codes for a minimum: the precomputed ds
// for 32 inputs, the same multiply on s16 for 16 (Q2_K). dsb, db: block blk's arrays at row0;
// s16: [sub * m + i] from row0.
template <int S>
inline float min_sum(const float* dsb, const float* db, const int32_t* s16, int64_t s, int64_t m,
                     int i) {
  if constexpr (S == 32) return dsb[i];
  return db[i] * static_cast<float>(s16[s * m + i]);
}

// One cache line into L1 (Locality 3, prefetcht0) or L2 (2, prefetcht1). The builtin, as in
// matmul_avx2_codes.h: _mm_prefetch's hint is an enum in GCC's headers and an int in Clang's.
template <int Locality = 3>
inline void prefetch_line(const uint8_t* p) {
  __builtin_prefetch(p, 0, Locality);
}

// The record stream of a group with split scales, Ahead bytes past record `rec`, into the
// cache level Locality names (see prefetch_line): once that passes the records' end it goes on with
// the next group's records (the next group of a chunk is the next in memory), past this group's
// scale areas, which the loop reads as it goes (see prefetch_split_scales).
template <int RecordBytes, int Ahead, int Locality>
inline void prefetch_split_records(const uint8_t* group, const SplitScaleAreas& areas,
                                   const uint8_t* rec) {
  const uint8_t* at = rec + Ahead;
  if (at >= group + areas.sc) at += areas.end - areas.sc;
#pragma GCC unroll 16
  for (int l = 0; l < RecordBytes; l += 64) prefetch_line<Locality>(at + l);
}

// The scale areas' own streams, a few lines ahead of record s (sub-block scales and minimums:
// a line per 4 records; super-block factors: a line per 16 records of 32 inputs), and, 16
// records before the end, the first lines of the next group's areas, which its first record
// reads.
template <int S, bool Min>
inline void prefetch_split_scales(const uint8_t* group, const SplitScaleAreas& areas, int64_t s,
                                  int64_t nsub) {
  constexpr int64_t kRecordsPerLine = 64 / 16;
  constexpr int64_t kLinesAhead = 4;
  if (s % kRecordsPerLine == 0) {
    prefetch_line(group + areas.sc + 16 * (s + kLinesAhead * kRecordsPerLine));
    if constexpr (Min) prefetch_line(group + areas.m + 16 * (s + kLinesAhead * kRecordsPerLine));
  }
  if (s % 16 == 0) {
    const int64_t super = s * S / 256;
    prefetch_line(group + areas.d + 32 * (super + kLinesAhead));
    if constexpr (Min) prefetch_line(group + areas.dmin + 32 * (super + kLinesAhead));
  }
  if (s == std::max<int64_t>(0, nsub - 16)) {
    const uint8_t* next = group + areas.end;
    prefetch_line(next + areas.sc);
    prefetch_line(next + areas.d);
    if constexpr (Min) {
      prefetch_line(next + areas.m);
      prefetch_line(next + areas.dmin);
    }
  }
}

// The loops below are written for the register allocator: every per-row array (int32 dots,
// f32 accumulators) is indexed only by fully unrolled compile-time loops, so it lives in
// registers (8 dots + 8 accumulators + 8 code vectors fit the 32 zmm registers), and the
// block-major activations put every row's codes and scales at constant offsets from one pointer.
// Rows are the innermost loop, so the MT dot chains are independent; tiles of fewer than 4 rows
// split each dot over two chains (integer sums: exact, so the result is the same bits). Tiles
// of 4 or more rows keep one chain per row: splitting those too measured slower (the kernel is
// bound by issue ports, not by vpdpbusd latency).
// F: the format; Bits and At say how this group holds it (as packed, or expanded to 8-bit
// records, whose table codes are already translated).
template <QuantFormat F, int Bits, int S, int ZP, bool Min, ScaleAt At, int MT>
void tile_quant(const uint8_t* group, const ActView& a, int64_t row0, float* tile) {
  constexpr bool kTranslate = F.has_table && Bits == 4;
  // Records as packed (F's code bytes), or expanded to 8-bit codes.
  constexpr int code_bytes = Bits == 8 ? 16 * S : F.code_bytes();
  static_assert(Bits == 8 || Bits == F.bits);
  constexpr int record_bytes = code_bytes + record_tail_bytes<At, Min>();
  const SplitScaleAreas areas = split_scale_areas(code_bytes, S, Min, F.nibble_factors, a.k);
  constexpr int NC = MT < 4 ? 2 : 1;  // dot chains per row
  static_assert(Min || zp_slot(ZP) >= 0, "a zero point without a correction slot");
  const int64_t nsub = a.k / S, m = a.m;
  __m512 acc[MT];
#pragma GCC unroll 8
  for (int i = 0; i < MT; ++i) acc[i] = _mm512_setzero_ps();
  const int8_t* q = a.q + row0 * 32;  // block 0, row row0
  const float* d = a.d + row0;        // [blk * m + i]
  const float* ds = a.ds + row0;
  const int32_t* s16 = a.s16 + row0;  // [sub * m + i]
  // -ZP * sum(q), [sub * m + i] (Min types have no zero point).
  const int32_t* corr = nullptr;
  if constexpr (!Min) corr = a.zp_corr[zp_slot(ZP)] + row0;
  // Each thread streams its groups' records in address order; the first row tile of a group
  // (the one that brings the weights from memory; later tiles reread them from L1) prefetches
  // kPrefetchBytes ahead, past the group's end into the next one, so the stream keeps enough
  // misses in flight across 4 KiB pages, where the hardware prefetchers stop. Split-scale types
  // also ask kFarPrefetchBytes ahead into L2, and for their scale areas' lines. A/B at 1 row
  // (alternating calls, 2 threads, same bits): Q4_K 1.2-1.4x on 1024- to 4096-input weights
  // (Llama 3.1 8B gate/up, Llama 3.2 1B gate/up, the default model's attention output), 1.11x
  // on 14336-input ones, Q6_K 0.97-1.09x; 1.0-1.3x at 4 rows, 1.02-1.07x at 8. Q8_0 and Q5_0,
  // whose groups are their records alone, measured 0.95-1.02x with it: the f16-scale types keep
  // the one stream.
  const bool prefetch = row0 == 0;
  for (int64_t s = 0; s < nsub; ++s) {
    const uint8_t* rec = group + s * record_bytes;
    if (prefetch) {
      if constexpr (At == ScaleAt::Split) {
        prefetch_split_records<record_bytes, kPrefetchBytes, 3>(group, areas, rec);
        prefetch_split_records<record_bytes, kFarPrefetchBytes, 2>(group, areas, rec);
        prefetch_split_scales<S, Min>(group, areas, s, nsub);
      } else {
#pragma GCC unroll 16
        for (int l = 0; l < record_bytes; l += 64) prefetch_line(rec + kPrefetchBytes + l);
      }
    }
    __m512i w[S / 4];
    load_codes<Bits, S>(rec, w);
    if constexpr (kTranslate) {
      const __m512i lut = table_codes<F>();
#pragma GCC unroll 8
      for (int j = 0; j < S / 4; ++j) w[j] = _mm512_shuffle_epi8(lut, w[j]);
    }
    const uint8_t* sp = rec + code_bytes;
    __m512 scale, mn;
    if constexpr (At == ScaleAt::F16InRecord) {
      scale = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sp)));
      if constexpr (Min)
        mn = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sp + 32)));
    } else if constexpr (At == ScaleAt::E8M0InRecord) {
      scale = e8m0_16(sp);
    } else if constexpr (At == ScaleAt::F32InRecord) {
      scale = _mm512_loadu_ps(sp);
      if constexpr (Min) mn = _mm512_loadu_ps(sp + 64);
    } else {
      scale = split_scale16<F>(group, areas, s);
      if constexpr (Min) mn = split_min16<F>(group, areas, s);
    }
    const int64_t blk = s * S / 32;
    const int8_t* qs = q + blk * m * 32 + (s * S) % 32;
    const float* db = d + blk * m;
    const float* dsb = ds + blk * m;
    __m512i dot[NC][MT];
#pragma GCC unroll 8
    for (int i = 0; i < MT; ++i) {
      if constexpr (Min) {
        dot[0][i] = _mm512_setzero_si512();
      } else {
        dot[0][i] = _mm512_set1_epi32(corr[s * m + i]);  // a broadcast load: no ALU work
      }
      if constexpr (NC == 2) dot[1][i] = _mm512_setzero_si512();
    }
#pragma GCC unroll 8
    for (int j = 0; j < S / 4; ++j) {
#pragma GCC unroll 8
      for (int i = 0; i < MT; ++i)
        dot[j % NC][i] = _mm512_dpbusd_epi32(dot[j % NC][i], w[j],
                                             _mm512_set1_epi32(load_i32(qs + 32 * i + 4 * j)));
    }
#pragma GCC unroll 8
    for (int i = 0; i < MT; ++i) {
      __m512i di = dot[0][i];
      if constexpr (NC == 2) di = _mm512_add_epi32(di, dot[1][i]);
      __m512 t = _mm512_mul_ps(scale, _mm512_set1_ps(db[i]));
      acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(di), t, acc[i]);
      if constexpr (Min)
        acc[i] = _mm512_fnmadd_ps(mn, _mm512_set1_ps(min_sum<S>(dsb, db, s16, s, m, i)), acc[i]);
    }
  }
#pragma GCC unroll 8
  for (int i = 0; i < MT; ++i) _mm512_storeu_ps(tile + 16 * i, acc[i]);
}

// Two groups of 8-bit records (see PairTileFn): the loop of tile_quant with Bits == 8, each
// broadcast activation word feeding both groups' dot chains.
template <int S, int ZP, bool Min, bool F16Scale, int MT>
void pair_tile_quant(const uint8_t* group0, const uint8_t* group1, const ActView& a, int64_t row0,
                     const TilePrefetch& next, float* tile0, float* tile1) {
  constexpr int code_bytes = 16 * S;
  constexpr int record_bytes = code_bytes + (F16Scale ? 32 : 64) + (Min ? 64 : 0);
  const int64_t nsub = a.k / S, m = a.m;
  __m512 acc0[MT], acc1[MT];
#pragma GCC unroll 4
  for (int i = 0; i < MT; ++i) acc0[i] = acc1[i] = _mm512_setzero_ps();
  const int8_t* q = a.q + row0 * 32;
  const float* d = a.d + row0;
  const float* ds = a.ds + row0;
  const int32_t* s16 = a.s16 + row0;
  const int32_t* corr = nullptr;
  if constexpr (!Min) corr = a.zp_corr[zp_slot(ZP)] + row0;
  // The first row tile brings both groups from memory (two streams, one group apart).
  const bool prefetch = row0 == 0;
  const uint8_t* next_line = next.begin;
  for (int64_t s = 0; s < nsub; ++s) {
    const uint8_t* rec0 = group0 + s * record_bytes;
    const uint8_t* rec1 = group1 + s * record_bytes;
    for (int64_t l = 0; l < next.per_record && next_line < next.end; l += 64, next_line += 64)
      _mm_prefetch(reinterpret_cast<const char*>(next_line), _MM_HINT_T1);
    if (prefetch) {
#pragma GCC unroll 16
      for (int l = 0; l < record_bytes; l += 64) {
        _mm_prefetch(reinterpret_cast<const char*>(rec0 + kPrefetchBytes + l), _MM_HINT_T0);
        _mm_prefetch(reinterpret_cast<const char*>(rec1 + kPrefetchBytes + l), _MM_HINT_T0);
      }
    }
    const int64_t blk = s * S / 32;
    const int8_t* qs = q + blk * m * 32 + (s * S) % 32;
    __m512i dot0[MT], dot1[MT];
#pragma GCC unroll 4
    for (int i = 0; i < MT; ++i) {
      if constexpr (Min) {
        dot0[i] = dot1[i] = _mm512_setzero_si512();
      } else {
        dot0[i] = dot1[i] = _mm512_set1_epi32(corr[s * m + i]);
      }
    }
#pragma GCC unroll 8
    for (int j = 0; j < S / 4; ++j) {
      const __m512i w0 = _mm512_loadu_si512(rec0 + 64 * j);
      const __m512i w1 = _mm512_loadu_si512(rec1 + 64 * j);
#pragma GCC unroll 4
      for (int i = 0; i < MT; ++i) {
        const __m512i x = _mm512_set1_epi32(load_i32(qs + 32 * i + 4 * j));
        dot0[i] = _mm512_dpbusd_epi32(dot0[i], w0, x);
        dot1[i] = _mm512_dpbusd_epi32(dot1[i], w1, x);
      }
    }
    __m512 scale0, scale1;
    if constexpr (F16Scale) {
      scale0 =
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec0 + code_bytes)));
      scale1 =
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec1 + code_bytes)));
    } else {
      scale0 = _mm512_loadu_ps(rec0 + code_bytes);
      scale1 = _mm512_loadu_ps(rec1 + code_bytes);
    }
    const float* db = d + blk * m;
    const float* dsb = ds + blk * m;
#pragma GCC unroll 4
    for (int i = 0; i < MT; ++i) {
      const __m512 di = _mm512_set1_ps(db[i]);
      acc0[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot0[i]), _mm512_mul_ps(scale0, di), acc0[i]);
      acc1[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot1[i]), _mm512_mul_ps(scale1, di), acc1[i]);
      if constexpr (Min) {
        const __m512 dsi = _mm512_set1_ps(min_sum<S>(dsb, db, s16, s, m, i));
        acc0[i] = _mm512_fnmadd_ps(_mm512_loadu_ps(rec0 + code_bytes + 64), dsi, acc0[i]);
        acc1[i] = _mm512_fnmadd_ps(_mm512_loadu_ps(rec1 + code_bytes + 64), dsi, acc1[i]);
      }
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < MT; ++i) {
    _mm512_storeu_ps(tile0 + 16 * i, acc0[i]);
    _mm512_storeu_ps(tile1 + 16 * i, acc1[i]);
  }
}

template <int S, int ZP, bool Min, bool F16Scale>
void pair_tile(const uint8_t* g0, const uint8_t* g1, const ActView& a, int64_t row0, int mt,
               const TilePrefetch& pf, float* t0, float* t1) {
  static_assert(kPairTileRows == 4);
  switch (mt) {
    case 1:
      return pair_tile_quant<S, ZP, Min, F16Scale, 1>(g0, g1, a, row0, pf, t0, t1);
    case 2:
      return pair_tile_quant<S, ZP, Min, F16Scale, 2>(g0, g1, a, row0, pf, t0, t1);
    case 3:
      return pair_tile_quant<S, ZP, Min, F16Scale, 3>(g0, g1, a, row0, pf, t0, t1);
    default:
      return pair_tile_quant<S, ZP, Min, F16Scale, 4>(g0, g1, a, row0, pf, t0, t1);
  }
}

template <DType T>
inline __m512 load_float16(const uint8_t* p) {
  if constexpr (T == DType::F32) {
    return _mm512_loadu_ps(p);
  } else if constexpr (T == DType::F16) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  } else {  // bf16: the high half of an f32
    __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
}

template <DType T, int MT>
void tile_float(const uint8_t* group, const ActView& a, int64_t row0, float* tile) {
  constexpr int eb = T == DType::F32 ? 4 : 2;
  __m512 acc[MT];
  for (int i = 0; i < MT; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t k = 0; k < a.k; ++k) {
    __m512 w = load_float16<T>(group + k * 16 * eb);
    for (int i = 0; i < MT; ++i)
      acc[i] = _mm512_fmadd_ps(_mm512_set1_ps(a.x[(row0 + i) * a.x_stride + k]), w, acc[i]);
  }
  for (int i = 0; i < MT; ++i) _mm512_storeu_ps(tile + 16 * i, acc[i]);
}

// Runtime row count -> compile-time tile height.
template <template <int> class K>
void by_rows(const uint8_t* group, const ActView& a, int64_t row0, int mt, float* tile) {
  static_assert(kMaxTileRows == 8);
  switch (mt) {
    case 1:
      return K<1>::run(group, a, row0, tile);
    case 2:
      return K<2>::run(group, a, row0, tile);
    case 3:
      return K<3>::run(group, a, row0, tile);
    case 4:
      return K<4>::run(group, a, row0, tile);
    case 5:
      return K<5>::run(group, a, row0, tile);
    case 6:
      return K<6>::run(group, a, row0, tile);
    case 7:
      return K<7>::run(group, a, row0, tile);
    default:
      return K<8>::run(group, a, row0, tile);
  }
}

template <QuantFormat F, int Bits, int S, int ZP, bool Min, ScaleAt At>
struct Quant {
  template <int MT>
  struct K {
    static void run(const uint8_t* g, const ActView& a, int64_t r, float* t) {
      tile_quant<F, Bits, S, ZP, Min, At, MT>(g, a, r, t);
    }
  };
  static void fn(const uint8_t* g, const ActView& a, int64_t r, int mt, float* t) {
    by_rows<K>(g, a, r, mt, t);
  }
};

template <DType T>
struct Float {
  template <int MT>
  struct K {
    static void run(const uint8_t* g, const ActView& a, int64_t r, float* t) {
      tile_float<T, MT>(g, a, r, t);
    }
  };
  static void fn(const uint8_t* g, const ActView& a, int64_t r, int mt, float* t) {
    by_rows<K>(g, a, r, mt, t);
  }
};

// Where an expanded group keeps its scales: f16 records copied as they are (Q4_0, Q5_0,
// IQ4_NL); every other form as f32 (the K-quants' products d * sc and dmin * m, formed as the
// direct kernel forms them; Q4_1/Q5_1's f16 and MXFP4's e8m0, converted exactly).
template <QuantFormat F>
constexpr ScaleAt expanded_scale_at() {
  return expanded_keeps_f16_scales(F) ? ScaleAt::F16InRecord : ScaleAt::F32InRecord;
}

// Rewrites every record of a group with 8-bit codes (see ExpandedTiles; lookup-table indices
// translated to their codes), each followed by its scales as expanded_scale_at says. Signed:
// code - zero_point as int8 instead (every zero-point format's differences fit), for the AMX
// tiles' signed x signed product, whose dots then need no correction.
template <QuantFormat F, bool Signed = false>
void expand_group(const uint8_t* group, int64_t k, uint8_t* out) {
  static_assert(!Signed || (F.zero_point != 0 && !F.has_min));
  constexpr int Bits = F.bits, S = F.sub_block;
  constexpr bool Min = F.has_min;
  constexpr int code_bytes = F.code_bytes();
  constexpr ScaleAt src_at = packed_scale_at<F>();
  constexpr ScaleAt dst_at = expanded_scale_at<F>();
  constexpr int src_record = code_bytes + record_tail_bytes<src_at, Min>();
  constexpr int dst_record = 16 * S + record_tail_bytes<dst_at, Min>();
  const SplitScaleAreas areas = split_scale_areas(code_bytes, S, Min, F.nibble_factors, k);
  for (int64_t s = 0; s < k / S; ++s) {
    const uint8_t* rec = group + s * src_record;
#pragma GCC unroll 16
    for (int l = 0; l < src_record; l += 64)
      _mm_prefetch(reinterpret_cast<const char*>(rec + kPrefetchBytes + l), _MM_HINT_T0);
    __m512i w[S / 4];
    load_codes<Bits, S>(rec, w);
    if constexpr (F.has_table) {
      const __m512i lut = table_codes<F>();
#pragma GCC unroll 8
      for (int j = 0; j < S / 4; ++j) w[j] = _mm512_shuffle_epi8(lut, w[j]);
    }
    if constexpr (Signed) {
      const __m512i zp = _mm512_set1_epi8(static_cast<char>(F.zero_point));
#pragma GCC unroll 8
      for (int j = 0; j < S / 4; ++j) w[j] = _mm512_sub_epi8(w[j], zp);
    }
    uint8_t* o = out + s * dst_record;
#pragma GCC unroll 8
    for (int j = 0; j < S / 4; ++j) _mm512_storeu_si512(o + 64 * j, w[j]);
    const uint8_t* sp = rec + code_bytes;
    if constexpr (dst_at == ScaleAt::F16InRecord) {
      std::memcpy(o + 16 * S, sp, record_tail_bytes<src_at, Min>());
    } else if constexpr (src_at == ScaleAt::Split) {
      _mm512_storeu_ps(o + 16 * S, split_scale16<F>(group, areas, s));
      if constexpr (Min) _mm512_storeu_ps(o + 16 * S + 64, split_min16<F>(group, areas, s));
    } else if constexpr (src_at == ScaleAt::E8M0InRecord) {
      _mm512_storeu_ps(o + 16 * S, e8m0_16(sp));
    } else {  // f16 scales and minimums
      _mm512_storeu_ps(o + 16 * S,
                       _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sp))));
      _mm512_storeu_ps(
          o + 16 * S + 64,
          _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sp + 32))));
    }
  }
}

template <QuantFormat F>
ExpandedTiles expanded() {
  constexpr ScaleAt at = expanded_scale_at<F>();
  constexpr int S = F.sub_block;
  ExpandedTiles e;
  e.expand = expand_group<F>;
  if constexpr (F.zero_point != 0 && !F.has_min) e.expand_signed = expand_group<F, true>;
  e.tile = Quant<F, 8, S, F.zero_point, F.has_min, at>::fn;
  e.pair = pair_tile<S, F.zero_point, F.has_min, at == ScaleAt::F16InRecord>;
  e.record_bytes = 16 * S + record_tail_bytes<at, F.has_min>();
  e.sub_block = S;
  return e;
}

}  // namespace

// Formats the table expands for many rows; 8-bit and float types are read as stored.
ExpandedTiles expanded_tiles_avx512(DType t) {
  return visit_quant_format(
      t,
      []<QuantFormat F>() -> ExpandedTiles {
        if constexpr (F.expand_for_many_rows)
          return expanded<F>();
        else
          return {};
      },
      ExpandedTiles{});
}

// The pair kernel on records as stored: the formats that are not expanded (8-bit codes).
PairTileFn pair_tile_fn_avx512(DType t) {
  return visit_quant_format(
      t,
      []<QuantFormat F>() -> PairTileFn {
        static_assert(F.expand_for_many_rows || (F.bits == 8 && !F.split_scales),
                      "records read as stored are 8-bit codes with in-record f16 scales");
        if constexpr (F.expand_for_many_rows)
          return nullptr;
        else
          return pair_tile<F.sub_block, F.zero_point, F.has_min, true>;
      },
      PairTileFn{nullptr});
}

TileFn tile_fn_avx512(DType t) {
  switch (t) {
    case DType::F32:
      return Float<DType::F32>::fn;
    case DType::F16:
      return Float<DType::F16>::fn;
    case DType::BF16:
      return Float<DType::BF16>::fn;
    default:
      break;
  }
  TileFn f = visit_quant_format(
      t,
      []<QuantFormat F>() -> TileFn {
        return Quant<F, F.bits, F.sub_block, F.zero_point, F.has_min, packed_scale_at<F>()>::fn;
      },
      TileFn{nullptr});
  KILN_CHECK(f != nullptr, "matmul: no kernel for {} weights", dtype_name(t));
  return f;
}

uint64_t rows_above_avx512(const float* tile, int mt, const float* best) {
  uint64_t rows = 0;
  for (int i = 0; i < mt; ++i) {
    const __mmask16 gt =
        _mm512_cmp_ps_mask(_mm512_loadu_ps(tile + 16 * i), _mm512_set1_ps(best[i]), _CMP_GT_OQ);
    rows |= static_cast<uint64_t>(gt != 0) << i;
  }
  return rows;
}

void quantize_row_avx512(const float* x, int64_t k, int64_t stride, int8_t* q, float* d,
                         int32_t* s16, int32_t* s32, float* ds) {
  const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
  for (int64_t b = 0; b < k / 32; ++b) {
    __m512 x0 = _mm512_loadu_ps(x + 32 * b), x1 = _mm512_loadu_ps(x + 32 * b + 16);
    // max(v, amax) keeps amax when v is NaN, like the scalar reference.
    __m512 amax = _mm512_max_ps(_mm512_abs_ps(x0), _mm512_setzero_ps());
    amax = _mm512_max_ps(_mm512_abs_ps(x1), amax);
    float m = _mm512_reduce_max_ps(amax);
    float inv = m > 0.0f ? 127.0f / m : 0.0f;
    const float db = m / 127.0f;
    d[b * stride] = db;
    __m512 vinv = _mm512_set1_ps(inv);
    __m512i c0 = _mm512_cvtps_epi32(_mm512_mul_ps(x0, vinv));
    __m512i c1 = _mm512_cvtps_epi32(_mm512_mul_ps(x1, vinv));
    c0 = _mm512_min_epi32(_mm512_max_epi32(c0, lo), hi);
    c1 = _mm512_min_epi32(_mm512_max_epi32(c1, lo), hi);
    int8_t* qb = q + 32 * b * stride;
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qb), _mm512_cvtepi32_epi8(c0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(qb + 16), _mm512_cvtepi32_epi8(c1));
    int32_t a0 = _mm512_reduce_add_epi32(c0), a1 = _mm512_reduce_add_epi32(c1);
    s16[2 * b * stride] = a0;
    s16[(2 * b + 1) * stride] = a1;
    s32[b * stride] = a0 + a1;
    ds[b * stride] = db * static_cast<float>(a0 + a1);
  }
}

}  // namespace kiln::kernels
