// Helpers shared by the AVX2 matmul kernels (matmul_avx2.cc: 1-row tiles read from the packed
// layout; matmul_gemm_avx2.cc: many-row tiles over 8-bit expanded records). Included only
// by translation units compiled with the AVX2 flags.
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kiln/kernels/packed_weight.h"
#include "kiln/kernels/quant_format.h"

namespace kiln::kernels::avx2 {

inline int32_t load_i32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Asks for `Bytes` bytes (whole cache lines from `at`) `Ahead` bytes past `at`: the weight stream
// ahead of where a kernel reads it, into L1 (Locality 3, prefetcht0) or L2 (2, prefetcht1). The
// builtin, because _mm_prefetch's hint is an enum in GCC's headers and an int in Clang's.
template <int Bytes, int Ahead, int Locality>
inline void prefetch_ahead(const uint8_t* at) {
  for (int l = 0; l < Bytes; l += 64) __builtin_prefetch(at + Ahead + l, 0, Locality);
}

// Words of a record whose int16 pair sums add without overflow before one vpmaddwd: a pair of
// b-bit codes times activations (-127..127) is at most 2 * (2^b - 1) * 127 in magnitude (4 bits:
// 3810, so 8 words, and narrower codes as many; 5 bits: 7874, 4; 6 bits: 16002, 2); Q8_0's
// sign-trick pairs reach 2 * 128 * 127 = 32512: 1. The int16 sums are exact, so the int32 dot
// is the same integer.
template <int Bits>
constexpr int words_per_madd() {
  return Bits <= 4 ? 8 : Bits == 5 ? 4 : Bits == 6 ? 2 : 1;
}

template <int Shift>
inline __m256i shift_bytes(__m256i v) {
  if constexpr (Shift > 0) return _mm256_slli_epi16(v, Shift);
  if constexpr (Shift < 0) return _mm256_srli_epi16(v, -Shift);
  return v;
}

// The f32 d of rows 8h .. 8h+7 of a split-scale super-block (f16, converted exactly).
inline __m256 split_d8(const uint8_t* d_f16, int h) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(d_f16 + 16 * h)));
}

// 8 f32 lanes of d * int8 factor, d from split_d8: rows 8h .. 8h+7 of a split-scale factor pair
// (exact).
inline __m256 split_factor8(__m256 d, const uint8_t* factor_i8, int h) {
  const __m128i f = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(factor_i8 + 8 * h));
  return _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(f)));
}

inline __m256 split_factor8(const uint8_t* d_f16, const uint8_t* factor_i8, int h) {
  return split_factor8(split_d8(d_f16, h), factor_i8, h);
}

// The same for a nibble_factors area (Q2_K, packed_weight.h): High picks m (the high nibbles),
// else sc (the low ones), both 0..15.
template <bool High>
inline __m256 split_nibble_factor8(__m256 d, const uint8_t* factors, int h) {
  const __m256i f =
      _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(factors + 8 * h)));
  const __m256i nibble =
      High ? _mm256_srli_epi32(f, 4) : _mm256_and_si256(f, _mm256_set1_epi32(0x0F));
  return _mm256_mul_ps(d, _mm256_cvtepi32_ps(nibble));
}

// A split-scale format's scale (d * sc) and minimum (dmin * m) of rows 8h .. 8h+7 of record s,
// as its factor areas hold them, from the super-block's f32 d and dmin (split_d8).
template <bool Nibbles>
inline __m256 split_scale8(__m256 d, const uint8_t* group, const SplitScaleAreas& areas, int64_t s,
                           int h) {
  if constexpr (Nibbles) return split_nibble_factor8<false>(d, group + areas.sc + 16 * s, h);
  return split_factor8(d, group + areas.sc + 16 * s, h);
}
template <bool Nibbles>
inline __m256 split_min8(__m256 dmin, const uint8_t* group, const SplitScaleAreas& areas, int64_t s,
                         int h) {
  if constexpr (Nibbles) return split_nibble_factor8<true>(dmin, group + areas.m + 16 * s, h);
  return split_factor8(dmin, group + areas.m + 16 * s, h);
}

// The four words of column half h (columns 8h .. 8h+7) of a 16-input record of 2- or 3-bit codes
// (packed_weight.h) as u8, vector byte 4r + t = code of column 8h + r, input 4J + t: crumbs
// 2J..2J+1 of the crumb vector's bytes, and (3 bits) bit J of the plane's nibble h at bit 2.
template <int Bits>
inline void narrow_words(const uint8_t* rec, int h, __m256i* w) {
  static_assert(Bits == 2 || Bits == 3);
  const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + 32 * h));
  __m256i third = _mm256_setzero_si256();
  if constexpr (Bits == 3) {
    third = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + 64));
    if (h == 1) third = _mm256_srli_epi16(third, 4);  // rows 8-15: the high nibbles
  }
  auto word = [&](auto j_constant) {
    constexpr int J = decltype(j_constant)::value;
    w[J] = _mm256_and_si256(shift_bytes<-2 * J>(raw), _mm256_set1_epi8(0x03));
    if constexpr (Bits == 3)
      w[J] = _mm256_or_si256(w[J],
                             _mm256_and_si256(shift_bytes<2 - J>(third), _mm256_set1_epi8(0x04)));
  };
  word(std::integral_constant<int, 0>{});
  word(std::integral_constant<int, 1>{});
  word(std::integral_constant<int, 2>{});
  word(std::integral_constant<int, 3>{});
}

// A lookup-table format's 16 int8 values in both 128-bit lanes, for vpshufb (index -> value).
inline __m256i table_lut(const int8_t* table) {
  return _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(table)));
}

// Exact int32 products of signed int8 weight values w (a table's) and activations a, 4 inputs
// per lane: the sign trick makes vpmaddubsw's unsigned operand |w| (pairs <= 2 * 127 * 127, no
// int16 overflow), then vpmaddwd adds the pairs.
inline __m256i signed_dot4(__m256i w, __m256i a) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(a, w)),
                           _mm256_set1_epi16(1));
}

// 8 f32 lanes 2^(e - 128) of 8 e8m0 bytes (rows 8h .. 8h + 7 of an MXFP4 record), as
// e8m0_to_f32 (dequant.h) forms each: exponent bits for e >= 2, the subnormals below.
inline __m256 e8m0_8(const uint8_t* e8) {
  const __m256i e = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(e8)));
  const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e, _mm256_set1_epi32(1)), 23);
  const __m256i subnormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e);
  const __m256i small = _mm256_cmpgt_epi32(_mm256_set1_epi32(2), e);
  return _mm256_castsi256_ps(_mm256_blendv_epi8(normal, subnormal, small));
}

// 8 f32 an expanded record holds (as an integer load: the same bytes, without a cast of bytes to
// a float pointer).
inline __m256 load_f32x8(const uint8_t* p) {
  return _mm256_castsi256_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// A packed record's codes of a 2-, 3- or 4-bit format as 8-bit ones (S/4 vectors of 64 bytes,
// vector j byte 4r + t = code of column r, input 4j + t), for the many-row tiles: table indices
// become their values + 128, as those tiles' signed records hold them.
template <QuantFormat F>
inline void expand_codes(const uint8_t* rec, uint8_t* o) {
  constexpr int S = F.sub_block, NV = S / 8;
  if constexpr (F.bits < 4) {
    for (int h = 0; h < 2; ++h) {
      __m256i w[S / 4];
      narrow_words<F.bits>(rec, h, w);
      for (int j = 0; j < S / 4; ++j)
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 64 * j + 32 * h), w[j]);
    }
  } else {
    static_assert(F.bits == 4, "2-, 3- or 4-bit codes or table indices");
    const __m256i low4 = _mm256_set1_epi8(0x0F);
    // Table values as chunk_rows' Signed8 records hold them: value + 128.
    const __m256i lut = table_lut(F.table.data()), to_unsigned = _mm256_set1_epi8(-128);
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      for (int h = 0; h < 2; ++h) {
        const __m256i raw =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + 64 * v + 32 * h));
        __m256i lo = _mm256_and_si256(raw, low4);
        __m256i hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
        if constexpr (F.has_table) {
          lo = _mm256_xor_si256(_mm256_shuffle_epi8(lut, lo), to_unsigned);
          hi = _mm256_xor_si256(_mm256_shuffle_epi8(lut, hi), to_unsigned);
        }
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 64 * v + 32 * h), lo);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(o + 64 * (v + NV) + 32 * h), hi);
      }
    }
  }
}

}  // namespace kiln::kernels::avx2
