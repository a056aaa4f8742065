// AVX2 many-row tiles (batches from 2 rows: many_row_tiles in matmul.cc), where row tiles read
// each group. Without VNNI the int8 dot is vpmaddubsw (u8 x s8 -> pairs of products summed to
// int16) then vpmaddwd with ones (-> int32); both run on the same two vector-multiply ports.
// The 8-row tiles of matmul_avx2.cc re-unpack 4/5/6-bit codes for every 2 rows. Here:
//  - a group's records are expanded once to 8-bit codes with f32 scales, in chunks that stay in
//    L1/L2 while every row of the batch reads them, by the first 4-row slab's pass over the
//    packed records (ChunkTiles::first), which also asks for the packed bytes ahead;
//  - pairs are summed in int16 before one vpmaddwd per G words: a pair of 4-bit codes (0..15)
//    times activations (-127..127) is at most 2 * 15 * 127 = 3810 in magnitude, so 8 pairs
//    (a whole 32-input record) add without overflow (30480); 5-bit codes (pairs <= 7874): 4;
//    6-bit (<= 16002): 2. Q8_0's sign-trick pairs reach 2 * 128 * 127 = 32512: one each. The
//    int16 sums are exact, so the int32 dot is the same integer;
//  - each weight vector pair (both 8-column halves of a 4-input word) is loaded once per MT rows
//    and each broadcast activation word feeds both halves.
// The f32 accumulators live in the caller's tile (one row tile's records are added chunk by
// chunk), with the same operations in the same order as the contract in matmul_kernels.h: the
// same bits as every other tier.
//
// Why this is close to the floor without VNNI: per 32-input record and 64 outputs (a 4-row
// sub-tile of one group), 4-bit codes take 64 vpmaddubsw + 56 vpaddw + 8 vpmaddwd for the integer
// dots (each vpmaddubsw's 16 int16 sums needs one add) and 32 float ops for the contract's
// per-record step (int -> float, scale * d, fma, fnmadd for a minimum; 8 outputs each): ~160
// vector ops, none optional. Q8_0's sign trick costs about 1.7x that per input (pairs reach
// 32512, so no int16 sums, and a vpsignb per word and row). Measured (old and new in one
// process) and dropped: two groups per 2-row sub-tile, each broadcast word feeding 4 vpmaddubsw
// (within the noise: broadcasts are loads, not vector-ALU issue); Q8_0 records expanded once per
// group into |q| and q planes, saving vpxor + vpabsb per word per sub-tile (10-20% slower: twice
// the bytes per record, so a 640-input group and 32 rows of activations no longer fit L1);
// record sub-chunks of 8-16 KiB with the row slabs inside (2-35% slower at m = 512: the slabs
// then stream with a jump each); software prefetch of the next group from a separate expansion
// pass (no gain: that pass ran beside no arithmetic; the fused first-slab pass does gain from
// asking ahead, see kPrefetchAhead); Q8_0 sub-tiles of 2 or 3 rows.
#include <immintrin.h>

#include <type_traits>

#include "kiln/kernels/matmul_avx2_codes.h"
#include "kiln/kernels/matmul_kernels.h"
#include "kiln/kernels/packed_weight.h"

namespace kiln::kernels {
namespace {

using avx2::load_i32;
using avx2::split_factor8;

// Bytes of a record as the chunk kernels read it: 8-bit codes (S/4 vectors of 64 bytes, as Q8_0
// stores them: vector j byte 4r + t = code of column r, input 4j + t, for each 8-column half) then,
// for expanded records (written by the first slab's pass, finish_half), 16 f32 scales and (Min)
// 16 f32 minimums; Q8_0's own records end with 16 f16 scales.
template <int S, bool Min, bool F16Scale>
constexpr int chunk_record_bytes() {
  return 16 * S + (F16Scale ? 32 : 64 + (Min ? 64 : 0));
}

// How far ahead of the record it reads the first slab's tile asks for the packed bytes (into L2,
// like the hardware's stream prefetch but early enough): about one group of a 2048-input Q4_K
// weight. Only that slab reads the packed group, so only its loads can stall on DRAM, and with
// every slab but the first computing from cache the stall is not hidden by the others' work.
// A/B (old and new in one process, alternating calls, 2 threads, m = 8): 8 KiB ahead 1.05x, 18
// and 32 KiB 1.16x, on top of the fused expansion below.
constexpr int kPrefetchAhead = 24 * 1024;

template <int Bytes>
inline void prefetch_ahead(const uint8_t* at) {
  avx2::prefetch_ahead<Bytes, kPrefetchAhead, 2>(at);  // into L2
}

// Adds records [s0, s1) (at `recs`, record s0 first) to the accumulators of rows row0 .. row0 +
// MT - 1, acc[16 i + c]. G: words (4 inputs) whose vpmaddubsw pairs are summed in int16 before
// one vpmaddwd (see the top of the file). The per-row arrays are indexed only by fully
// unrolled loops so they live in registers: 2 MT int16 sums + 2 weight vectors + 1 broadcast.
template <int S, int ZP, bool Min, bool Signed8, int G, bool F16Scale, int MT>
void chunk_rows(const uint8_t* recs, const ActView& a, int64_t s0, int64_t s1, int64_t row0,
                float* acc) {
  constexpr int W = S / 4;  // 4-input words per record
  static_assert(W % G == 0);
  constexpr int code_bytes = 16 * S;
  constexpr int record_bytes = chunk_record_bytes<S, Min, F16Scale>();
  constexpr bool kZeroPoint = !Min && !Signed8;
  static_assert(!kZeroPoint || zp_slot(ZP) >= 0, "a zero point without a correction slot");
  const int64_t m = a.m;
  const int8_t* q = a.q + row0 * 32;  // block 0, row row0; row i of block b at b * 32 m + 32 i
  const float* d = a.d + row0;        // [blk * m + i]
  const float* ds = a.ds + row0;
  const int32_t* s16 = a.s16 + row0;  // [sub * m + i]: Q2_K's minimum sums
  const int32_t* corr = nullptr;      // -ZP * sum(q), [sub * m + i]
  if constexpr (kZeroPoint) corr = a.zp_corr[zp_slot(ZP)] + row0;
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t s = s0; s < s1; ++s) {
    const uint8_t* rec = recs + (s - s0) * record_bytes;
    const int64_t blk = s * S / 32;
    const int8_t* qa = q + blk * m * 32 + (s * S) % 32;
    __m256i dot[MT][2];
#pragma GCC unroll 8
    for (int i = 0; i < MT; ++i) {
      if constexpr (kZeroPoint) {
        dot[i][0] = dot[i][1] = _mm256_set1_epi32(corr[s * m + i]);
      } else {
        dot[i][0] = dot[i][1] = _mm256_setzero_si256();
      }
    }
#pragma GCC unroll 8
    for (int g = 0; g < W / G; ++g) {
      __m256i p16[MT][2];
#pragma GCC unroll 8
      for (int jj = 0; jj < G; ++jj) {
        const int j = g * G + jj;
        __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + 64 * j));
        __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + 64 * j + 32));
        __m256i u0 = w0, u1 = w1;
        if constexpr (Signed8) {  // stored code + 128: back to signed, then the sign trick
          w0 = _mm256_xor_si256(w0, _mm256_set1_epi8(-128));
          w1 = _mm256_xor_si256(w1, _mm256_set1_epi8(-128));
          u0 = _mm256_abs_epi8(w0);
          u1 = _mm256_abs_epi8(w1);
        }
#pragma GCC unroll 8
        for (int i = 0; i < MT; ++i) {
          const __m256i av = _mm256_set1_epi32(load_i32(qa + 32 * i + 4 * j));
          __m256i a0 = av, a1 = av;
          if constexpr (Signed8) {
            a0 = _mm256_sign_epi8(av, w0);
            a1 = _mm256_sign_epi8(av, w1);
          }
          if (jj == 0) {
            p16[i][0] = _mm256_maddubs_epi16(u0, a0);
            p16[i][1] = _mm256_maddubs_epi16(u1, a1);
          } else {
            p16[i][0] = _mm256_add_epi16(p16[i][0], _mm256_maddubs_epi16(u0, a0));
            p16[i][1] = _mm256_add_epi16(p16[i][1], _mm256_maddubs_epi16(u1, a1));
          }
          // Keeps each sum one chain in a register: GCC otherwise reassociates the adds into
          // trees over all G products, which spills them to the stack.
          asm("" : "+x"(p16[i][0]), "+x"(p16[i][1]));
        }
      }
#pragma GCC unroll 8
      for (int i = 0; i < MT; ++i) {
        for (int h = 0; h < 2; ++h)
          dot[i][h] = _mm256_add_epi32(dot[i][h], _mm256_madd_epi16(p16[i][h], ones));
        asm("" : "+x"(dot[i][0]), "+x"(dot[i][1]));  // likewise
      }
    }
    for (int h = 0; h < 2; ++h) {
      __m256 scale, mn;
      if constexpr (F16Scale) {
        scale = _mm256_cvtph_ps(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + code_bytes + 16 * h)));
      } else {
        scale = avx2::load_f32x8(rec + code_bytes + 32 * h);
      }
      if constexpr (Min) mn = avx2::load_f32x8(rec + code_bytes + 64 + 32 * h);
#pragma GCC unroll 8
      for (int i = 0; i < MT; ++i) {
        float* at = acc + 16 * i + 8 * h;
        const __m256 t = _mm256_mul_ps(scale, _mm256_set1_ps(d[blk * m + i]));
        __m256 f = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[i][h]), t, _mm256_loadu_ps(at));
        if constexpr (Min) {
          // The contract's d_b * sum of the sub-block's codes (16 inputs: Q2_K).
          const float msum =
              S == 32 ? ds[blk * m + i] : d[blk * m + i] * static_cast<float>(s16[s * m + i]);
          f = _mm256_fnmadd_ps(mn, _mm256_set1_ps(msum), f);
        }
        _mm256_storeu_ps(at, f);
      }
    }
  }
}

// Any number of rows: sub-tiles of MT rows, then the remainder.
template <int S, int ZP, bool Min, bool Signed8, int G, bool F16Scale, int MT>
void chunk_tile(const uint8_t* recs, const ActView& a, int64_t s0, int64_t s1, int64_t row0, int mt,
                float* acc) {
  int i = 0;
  for (; i + MT <= mt; i += MT)
    chunk_rows<S, ZP, Min, Signed8, G, F16Scale, MT>(recs, a, s0, s1, row0 + i, acc + 16 * i);
  if constexpr (MT > 1) {
    if (i < mt)
      chunk_tile<S, ZP, Min, Signed8, G, F16Scale, MT - 1>(recs, a, s0, s1, row0 + i, mt - i,
                                                           acc + 16 * i);
  }
}

// The end of a record's column half h for MT rows in the first slab's pass: the record's
// scales (and minimums) as f32 (the f16 scale converted, exactly; for K-quants the products
// d * sc and dmin * m, formed as the 8-row kernel forms them) stored to the expanded record `o`
// for the other slabs, then the contract's float step on the int32 dots, as chunk_rows does it.
// `rec_scales`: the record's f16 scales (types without split scales).
template <int S, bool Min, bool Split, int MT>
inline void finish_half(const uint8_t* group, const SplitScaleAreas& areas,
                        const uint8_t* rec_scales, int64_t s, int h, const ActView& a, int64_t row0,
                        const __m256i* dot, uint8_t* o, float* acc) {
  const int64_t super = s * S / 256, blk = s * S / 32, m = a.m;
  __m256 scale, mn;
  if constexpr (Split) {
    scale = split_factor8(group + areas.d + 32 * super, group + areas.sc + 16 * s, h);
    if constexpr (Min)
      mn = split_factor8(group + areas.dmin + 32 * super, group + areas.m + 16 * s, h);
  } else {
    scale = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rec_scales + 16 * h)));
    if constexpr (Min)  // Q4_1/Q5_1: the record's f16 minimums follow its scales
      mn = _mm256_cvtph_ps(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(rec_scales + 32 + 16 * h)));
  }
  _mm256_storeu_ps(reinterpret_cast<float*>(o + 16 * S + 32 * h), scale);
  if constexpr (Min) _mm256_storeu_ps(reinterpret_cast<float*>(o + 16 * S + 64 + 32 * h), mn);
#pragma GCC unroll 8
  for (int i = 0; i < MT; ++i) {
    float* at = acc + 16 * i + 8 * h;
    const __m256 t = _mm256_mul_ps(scale, _mm256_set1_ps(a.d[blk * m + row0 + i]));
    __m256 f = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[i]), t, _mm256_loadu_ps(at));
    if constexpr (Min) f = _mm256_fnmadd_ps(mn, _mm256_set1_ps(a.ds[blk * m + row0 + i]), f);
    _mm256_storeu_ps(at, f);
  }
}

// The activations a first-slab pass reads for rows row0 .. : codes, and the zero-point
// corrections (-ZP * sum(q) per record) of types with a zero point (ZP 0: none, as for the
// K-quants with a minimum).
template <int ZP>
struct FirstSlabActs {
  FirstSlabActs(const ActView& a, int64_t row0)
      : m(a.m), q(a.q + row0 * 32), corr(corrections(a, row0)) {}
  // Where row i's int32 dot of record s starts: its correction, or 0.
  __m256i dot0(int64_t s, int i) const {
    if constexpr (ZP > 0) return _mm256_set1_epi32(corr[s * m + i]);
    return _mm256_setzero_si256();
  }
  static const int32_t* corrections(const ActView& a, int64_t row0) {
    if constexpr (ZP > 0) return a.zp_corr[zp_slot(ZP)] + row0;
    return nullptr;
  }
  int64_t m;
  const int8_t* q;      // block 0, row row0; row i of block b at b * 32 m + 32 i
  const int32_t* corr;  // [record * m + i]
};

// The first slab's pass over records [s0, s1) of a packed 4-bit group (Q4_0, Q4_K): the dot
// products of chunk_rows, reading the codes packed, and the expanded records (chunk_record_bytes'
// layout) stored to `out` for the other slabs. Each word is unpacked in registers, used and
// stored, so the expansion costs stores beside the dot products instead of a pass of its own
// (which took about as long as one slab's dots, and held the loads from DRAM apart from any
// arithmetic). Words are summed in the order v, v + 4 (a raw vector's low, then high nibbles):
// int16 sums of at most 8 pairs of 4-bit codes cannot overflow in any order, so the integer dot
// is the same. A/B against expanding first (Llama-1B up projection, m = 8, 2 threads): 1.14x;
// with the prefetch, 1.34x; at m = 4 (one slab, one thread): 1.2x / 1.57x.
template <int S, int ZP, bool Min, bool Split, int MT>
void first_rows_4bit(const uint8_t* group, int64_t k, const ActView& a, int64_t s0, int64_t s1,
                     int64_t row0, float* acc, uint8_t* out) {
  static_assert(S == 32, "4-bit records of 32 inputs");
  constexpr int NV = S / 8;  // raw vectors per half record, two words each
  constexpr int code_bytes = 8 * S;
  constexpr int src_record = code_bytes + (Split ? 0 : Min ? 64 : 32);  // in-record scales
  constexpr int dst_record = chunk_record_bytes<S, Min, false>();
  static_assert(avx2::words_per_madd<4>() == S / 4, "one vpmaddwd per record");
  static_assert(Min == (ZP == 0), "a minimum or a zero point");
  const SplitScaleAreas areas = split_scale_areas(code_bytes, S, Min, false, k);
  const FirstSlabActs<ZP> acts(a, row0);
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  for (int64_t s = s0; s < s1; ++s) {
    const uint8_t* rec = group + s * src_record;
    prefetch_ahead<src_record>(rec);
    uint8_t* o = out + (s - s0) * dst_record;
    const int64_t blk = s;  // 32-input records: record s is block s
    const int8_t* qa = acts.q + blk * acts.m * 32;
    __m256i p16[MT][2];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      const __m256i raw0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + 64 * v));
      const __m256i raw1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + 64 * v + 32));
#pragma GCC unroll 2
      for (int part = 0; part < 2; ++part) {
        const int j = v + part * NV;
        const __m256i w0 = _mm256_and_si256(part == 0 ? raw0 : _mm256_srli_epi16(raw0, 4), low4);
        const __m256i w1 = _mm256_and_si256(part == 0 ? raw1 : _mm256_srli_epi16(raw1, 4), low4);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 64 * j), w0);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 64 * j + 32), w1);
#pragma GCC unroll 8
        for (int i = 0; i < MT; ++i) {
          const __m256i av = _mm256_set1_epi32(load_i32(qa + 32 * i + 4 * j));
          if (j == 0) {
            p16[i][0] = _mm256_maddubs_epi16(w0, av);
            p16[i][1] = _mm256_maddubs_epi16(w1, av);
          } else {
            p16[i][0] = _mm256_add_epi16(p16[i][0], _mm256_maddubs_epi16(w0, av));
            p16[i][1] = _mm256_add_epi16(p16[i][1], _mm256_maddubs_epi16(w1, av));
          }
          asm("" : "+x"(p16[i][0]), "+x"(p16[i][1]));  // one chain each, as in chunk_rows
        }
      }
    }
    for (int h = 0; h < 2; ++h) {
      __m256i dot[MT];
#pragma GCC unroll 8
      for (int i = 0; i < MT; ++i) {
        dot[i] = _mm256_madd_epi16(p16[i][h], ones);
        if constexpr (ZP > 0) dot[i] = _mm256_add_epi32(dot[i], acts.dot0(s, i));
      }
      finish_half<S, Min, Split, MT>(group, areas, rec + code_bytes, s, h, a, row0, dot, o, acc);
    }
  }
}

// Any slab height up to MT rows.
template <int S, int ZP, bool Min, bool Split, int MT>
void first_tile_4bit(const uint8_t* group, int64_t k, const ActView& a, int64_t s0, int64_t s1,
                     int64_t row0, int mt, float* acc, uint8_t* out) {
  if (mt >= MT) return first_rows_4bit<S, ZP, Min, Split, MT>(group, k, a, s0, s1, row0, acc, out);
  if constexpr (MT > 1)
    first_tile_4bit<S, ZP, Min, Split, MT - 1>(group, k, a, s0, s1, row0, mt, acc, out);
}

// The first slab's pass for Q6_K (6-bit codes in 16-input records, zero point 32), fused like
// first_rows_4bit. The int32 dots and the int16 pair sums of all four rows of both column halves
// would take every register, so the halves are taken one after the other (each activation word
// is broadcast twice: loads, not vector arithmetic). Each raw vector gives words v (low
// nibbles) and v + 2 (high), summed in int16 as one pair (two words of 6-bit codes cannot
// overflow, in either order): the same integer dot. A/B against expanding two records at a time
// and reading them back (alternating calls, 2 threads): 1.09-1.21x at 4 and 8 rows (8B down and
// V, 270M down shapes), 1.03-1.05x at 32.
template <int MT>
void first_rows_q6_k(const uint8_t* group, int64_t k, const ActView& a, int64_t s0, int64_t s1,
                     int64_t row0, float* acc, uint8_t* out) {
  constexpr int S = 16, code_bytes = 8 * S + 64;  // two nibble vectors and the high-bit plane
  constexpr int dst_record = chunk_record_bytes<S, false, false>();
  static_assert(avx2::words_per_madd<6>() == 2, "one int16 pair of words per vpmaddwd");
  const SplitScaleAreas areas = split_scale_areas(code_bytes, S, false, false, k);
  const FirstSlabActs<32> acts(a, row0);
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i high2 = _mm256_set1_epi8(0x30);
  for (int64_t s = s0; s < s1; ++s) {
    const uint8_t* rec = group + s * code_bytes;
    prefetch_ahead<code_bytes>(rec);
    uint8_t* o = out + (s - s0) * dst_record;
    const int64_t blk = s * S / 32;
    const int8_t* qa = acts.q + blk * acts.m * 32 + (s * S) % 32;
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m256i dot[MT];
#pragma GCC unroll 8
      for (int i = 0; i < MT; ++i) dot[i] = acts.dot0(s, i);
      const __m256i plane =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + 128 + 32 * h));
      // One raw vector of each half; v is a constant for the plane's shifts.
      auto word_pair = [&](auto v_constant) {
        constexpr int v = decltype(v_constant)::value;
        const __m256i raw =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + 64 * v + 32 * h));
        // Word J's two high bits sit at bits 2J, 2J + 1 of each plane byte; they go to bits 4-5.
        const __m256i lo =
            _mm256_or_si256(_mm256_and_si256(raw, low4),
                            _mm256_and_si256(avx2::shift_bytes<4 - 2 * v>(plane), high2));
        const __m256i hi =
            _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(raw, 4), low4),
                            _mm256_and_si256(avx2::shift_bytes<-2 * v>(plane), high2));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 64 * v + 32 * h), lo);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 64 * (v + 2) + 32 * h), hi);
#pragma GCC unroll 8
        for (int i = 0; i < MT; ++i) {
          const __m256i a_lo = _mm256_set1_epi32(load_i32(qa + 32 * i + 4 * v));
          const __m256i a_hi = _mm256_set1_epi32(load_i32(qa + 32 * i + 4 * (v + 2)));
          const __m256i p16 =
              _mm256_add_epi16(_mm256_maddubs_epi16(lo, a_lo), _mm256_maddubs_epi16(hi, a_hi));
          dot[i] = _mm256_add_epi32(dot[i], _mm256_madd_epi16(p16, ones));
        }
      };
      word_pair(std::integral_constant<int, 0>{});
      word_pair(std::integral_constant<int, 1>{});
      finish_half<S, false, true, MT>(group, areas, nullptr, s, h, a, row0, dot, o, acc);
    }
  }
}

template <int MT>
void first_tile_q6_k(const uint8_t* group, int64_t k, const ActView& a, int64_t s0, int64_t s1,
                     int64_t row0, int mt, float* acc, uint8_t* out) {
  if (mt >= MT) return first_rows_q6_k<MT>(group, k, a, s0, s1, row0, acc, out);
  if constexpr (MT > 1) first_tile_q6_k<MT - 1>(group, k, a, s0, s1, row0, mt, acc, out);
}

// The first slab's pass for 5-bit codes (Q5_0, Q5_K), fused like first_rows_q6_k: column halves
// one after the other; raw vector v gives words v and v + 4, each with its fifth bit from the
// plane, and the words of two raw vectors (4, the most whose int16 pair sums cannot overflow:
// avx2::words_per_madd) are summed in int16 before one vpmaddwd: the same integer dot. A/B
// against expanding two records at a time and reading them back (alternating calls, 2 threads):
// 1.07-1.16x at 4 and 8 rows (default model's Q5_0 projections, a Q5_K 2048 -> 8192), 1.01-1.04x
// at 32.
template <int ZP, bool Min, bool Split, int MT>
void first_rows_5bit(const uint8_t* group, int64_t k, const ActView& a, int64_t s0, int64_t s1,
                     int64_t row0, float* acc, uint8_t* out) {
  constexpr int S = 32, code_bytes = 8 * S + 64;  // four nibble vectors and the high-bit plane
  constexpr int src_record = code_bytes + (Split ? 0 : Min ? 64 : 32);  // in-record scales
  constexpr int dst_record = chunk_record_bytes<S, Min, false>();
  static_assert(avx2::words_per_madd<5>() == 4, "two raw vectors' words per vpmaddwd");
  static_assert(Min == (ZP == 0), "a minimum or a zero point");
  const SplitScaleAreas areas = split_scale_areas(code_bytes, S, Min, false, k);
  const FirstSlabActs<ZP> acts(a, row0);
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i bit4 = _mm256_set1_epi8(0x10);
  for (int64_t s = s0; s < s1; ++s) {
    const uint8_t* rec = group + s * src_record;
    prefetch_ahead<src_record>(rec);
    uint8_t* o = out + (s - s0) * dst_record;
    const int64_t blk = s;  // 32-input records: record s is block s
    const int8_t* qa = acts.q + blk * acts.m * 32;
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      __m256i dot[MT];
#pragma GCC unroll 8
      for (int i = 0; i < MT; ++i) dot[i] = acts.dot0(s, i);
      const __m256i plane =
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + 256 + 32 * h));
      __m256i p16[MT];
      // Raw vector v of this half; v is a constant for the plane's shifts.
      auto word_pair = [&](auto v_constant) {
        constexpr int v = decltype(v_constant)::value;
        const __m256i raw =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + 64 * v + 32 * h));
        // Word J's fifth bit is bit J of each plane byte; it goes to bit 4.
        const __m256i lo = _mm256_or_si256(_mm256_and_si256(raw, low4),
                                           _mm256_and_si256(avx2::shift_bytes<4 - v>(plane), bit4));
        const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(raw, 4), low4),
                                           _mm256_and_si256(avx2::shift_bytes<-v>(plane), bit4));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 64 * v + 32 * h), lo);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 64 * (v + 4) + 32 * h), hi);
#pragma GCC unroll 8
        for (int i = 0; i < MT; ++i) {
          const __m256i a_lo = _mm256_set1_epi32(load_i32(qa + 32 * i + 4 * v));
          const __m256i a_hi = _mm256_set1_epi32(load_i32(qa + 32 * i + 4 * (v + 4)));
          const __m256i pair =
              _mm256_add_epi16(_mm256_maddubs_epi16(lo, a_lo), _mm256_maddubs_epi16(hi, a_hi));
          p16[i] = v % 2 == 0 ? pair : _mm256_add_epi16(p16[i], pair);
          if constexpr (v % 2 == 1)
            dot[i] = _mm256_add_epi32(dot[i], _mm256_madd_epi16(p16[i], ones));
        }
      };
      word_pair(std::integral_constant<int, 0>{});
      word_pair(std::integral_constant<int, 1>{});
      word_pair(std::integral_constant<int, 2>{});
      word_pair(std::integral_constant<int, 3>{});
      finish_half<S, Min, Split, MT>(group, areas, rec + code_bytes, s, h, a, row0, dot, o, acc);
    }
  }
}

template <int ZP, bool Min, bool Split, int MT>
void first_tile_5bit(const uint8_t* group, int64_t k, const ActView& a, int64_t s0, int64_t s1,
                     int64_t row0, int mt, float* acc, uint8_t* out) {
  if (mt >= MT) return first_rows_5bit<ZP, Min, Split, MT>(group, k, a, s0, s1, row0, acc, out);
  if constexpr (MT > 1)
    first_tile_5bit<ZP, Min, Split, MT - 1>(group, k, a, s0, s1, row0, mt, acc, out);
}

// Q8_0's first slab reads the packed records in place, as the others do. (Asking for them ahead
// as above measured within the noise here: 1.00-1.02x at m = 4 and 8 on the default model's LM
// head, where each record feeds 4x more vector work than a 4-bit one.)
template <int MT>
void first_tile_q8_0(const uint8_t* group, int64_t /*k*/, const ActView& a, int64_t s0, int64_t s1,
                     int64_t row0, int mt, float* acc, uint8_t* /*out*/) {
  constexpr int record = chunk_record_bytes<32, false, true>();
  chunk_tile<32, 128, false, true, 1, true, MT>(group + s0 * record, a, s0, s1, row0, mt, acc);
}

// The first slab's pass for the formats the fused passes above do not take (2- and 3-bit codes:
// Q2_K, Q3_K; lookup-table indices: IQ4_NL, IQ4_XS, MXFP4): records [s0, s1) are expanded to
// `out` first (expand_record), then read there as every other slab reads them. Each record's
// codes are unpacked as the 1-row tile unpacks them and its scales formed as it forms them, so
// the arithmetic is the same; the cost is a pass over the chunk's stores before its first dot
// products (the fused passes overlap the two), which matters only at a few rows.
template <QuantFormat F>
inline void expand_record(const uint8_t* group, const SplitScaleAreas& areas, int64_t s,
                          uint8_t* o) {
  constexpr int S = F.sub_block, code_bytes = F.code_bytes();
  const uint8_t* rec = group + s * F.record_bytes();
  avx2::expand_codes<F>(rec, o);
  const int64_t super = s * S / 256;
  for (int h = 0; h < 2; ++h) {
    __m256 scale, mn;
    if constexpr (F.split_scales) {
      scale = avx2::split_scale8<F.nibble_factors>(avx2::split_d8(group + areas.d + 32 * super, h),
                                                   group, areas, s, h);
      if constexpr (F.has_min)
        mn = avx2::split_min8<F.nibble_factors>(avx2::split_d8(group + areas.dmin + 32 * super, h),
                                                group, areas, s, h);
    } else if constexpr (F.record_scale == RecordScale::E8M0) {
      scale = avx2::e8m0_8(rec + code_bytes + 8 * h);
    } else {
      scale = _mm256_cvtph_ps(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + code_bytes + 16 * h)));
      if constexpr (F.has_min)
        mn = _mm256_cvtph_ps(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + code_bytes + 32 + 16 * h)));
    }
    // (Stored as integer vectors: the same bytes, without a cast of bytes to float pointers.)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 16 * S + 32 * h),
                        _mm256_castps_si256(scale));
    if constexpr (F.has_min)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 16 * S + 64 + 32 * h),
                          _mm256_castps_si256(mn));
  }
}

template <QuantFormat F, int G>
void first_tile_expand(const uint8_t* group, int64_t k, const ActView& a, int64_t s0, int64_t s1,
                       int64_t row0, int mt, float* acc, uint8_t* out) {
  constexpr int S = F.sub_block;
  constexpr int dst_record = chunk_record_bytes<S, F.has_min, false>();
  const SplitScaleAreas areas =
      split_scale_areas(F.code_bytes(), S, F.has_min, F.nibble_factors, k);
  for (int64_t s = s0; s < s1; ++s) {
    prefetch_ahead<F.record_bytes()>(group + s * F.record_bytes());
    expand_record<F>(group, areas, s, out + (s - s0) * dst_record);
  }
  chunk_tile<S, F.zero_point, F.has_min, F.has_table, G, false, kChunkSlabRows>(out, a, s0, s1,
                                                                                row0, mt, acc);
}

// Rows per sub-tile: 4 keeps 8 int16 sums, 2 weight vectors and the broadcast in the 16 ymm
// registers (5- and 6-bit codes also keep 8 int32 sums across their int16 groups, and Q8_0's
// sign trick needs 4 weight vectors per word: a few spills). Measured (one thread, Q4_K/Q5_0/
// Q6_K at m = 128, Q8_0 at m = 8 and 32): 2 rows 10-20% slower, 3 to 6 within the noise; and 4
// is the activation slab (kChunkSlabRows), which a 3-row sub-tile would leave a 1-row remainder.
// Lookup-table formats are read as signed values with the sign trick (one word per vpmaddwd, as
// Q8_0); 16-input records sum all 4 of their words in int16.
template <QuantFormat F>
ChunkTiles expanded() {
  constexpr int Bits = F.bits, S = F.sub_block, ZP = F.zero_point;
  constexpr bool Min = F.has_min, Split = F.split_scales;
  constexpr int G = F.has_table                            ? 1
                    : avx2::words_per_madd<Bits>() < S / 4 ? avx2::words_per_madd<Bits>()
                                                           : S / 4;
  ChunkTiles c;
  if constexpr (F.has_table || Bits < 4) {
    c.first = first_tile_expand<F, G>;
  } else if constexpr (Bits == 4) {
    c.first = first_tile_4bit<S, ZP, Min, Split, kChunkSlabRows>;
  } else if constexpr (Bits == 6) {
    static_assert(S == 16 && ZP == 32 && !Min && Split, "Q6_K's layout");
    c.first = first_tile_q6_k<kChunkSlabRows>;
  } else {
    static_assert(Bits == 5 && S == 32, "5-bit codes in 32-input records");
    c.first = first_tile_5bit<ZP, Min, Split, kChunkSlabRows>;
  }
  c.tile = chunk_tile<S, ZP, Min, F.has_table, G, false, kChunkSlabRows>;
  c.expanded = true;
  c.record_bytes = chunk_record_bytes<S, Min, false>();
  c.sub_block = S;
  return c;
}

}  // namespace

// Float weights have no chunk form (they take the 8-row tiles).
ChunkTiles chunk_tiles_avx2(DType t) {
  return visit_quant_format(
      t,
      []<QuantFormat F>() -> ChunkTiles {
        if constexpr (F.expand_for_many_rows) {
          return expanded<F>();
        } else {  // read as packed: 8-bit codes and f16 scales already
          static_assert(F.bits == 8 && F.sub_block == 32 && !F.has_min && !F.split_scales,
                        "records read as stored are Q8_0's");
          ChunkTiles c;
          c.first = first_tile_q8_0<kChunkSlabRows>;
          c.tile = chunk_tile<32, F.zero_point, false, true, 1, true, kChunkSlabRows>;
          c.record_bytes = chunk_record_bytes<32, false, true>();
          c.sub_block = 32;
          return c;
        }
      },
      ChunkTiles{});
}

}  // namespace kiln::kernels
