// Helpers of the AVX-512 matmul kernels (matmul_avx512.cc): a packed record's codes unpacked to
// u8 words for vpdpbusd, whatever their width (packed_weight.h), and its scales formed from the
// record or the split-scale areas. Included only by translation units compiled with the AVX-512
// flags.
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kiln/kernels/packed_weight.h"
#include "kiln/kernels/quant_format.h"

namespace kiln::kernels::avx512 {

inline int32_t load_i32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Moves each byte's bits so that plane bits for input group J land at bit 4 (5-bit codes:
// bit J) or bits 4..5 (6-bit codes: bits 2J..2J+1). Word shifts are safe: the mask below
// keeps only bits that came from the same byte.
template <int Shift>
inline __m512i shift_bytes(__m512i v) {
  if constexpr (Shift > 0) return _mm512_slli_epi16(v, Shift);
  if constexpr (Shift < 0) return _mm512_srli_epi16(v, -Shift);
  return v;
}

template <int Bits, int S, int J>
inline void add_high_bits(__m512i* w, __m512i plane) {
  if constexpr (J < S / 4) {
    if constexpr (Bits == 5) {
      w[J] = _mm512_or_si512(w[J],
                             _mm512_and_si512(shift_bytes<4 - J>(plane), _mm512_set1_epi8(0x10)));
    } else {
      w[J] = _mm512_or_si512(
          w[J], _mm512_and_si512(shift_bytes<4 - 2 * J>(plane), _mm512_set1_epi8(0x30)));
    }
    add_high_bits<Bits, S, J + 1>(w, plane);
  }
}

// The third bits of a 16-input record of 3-bit codes, moved so that each byte of the 64-byte
// crumb vector has its own in bits 0..3 (bit J: input group J): the plane's 32 bytes hold rows
// 0-7 in their low nibbles and rows 8-15 in their high ones (packed_weight.h), so the upper half
// takes the plane shifted down by 4. (Higher bits are left over; the caller masks them off.)
inline __m512i third_bits(const uint8_t* plane) {
  const __m256i p = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(plane));
  return _mm512_inserti64x4(_mm512_castsi256_si512(p), _mm256_srli_epi16(p, 4), 1);
}

template <int Bits, int J>
inline void add_narrow_word(__m512i* w, __m512i crumbs, __m512i third) {
  if constexpr (J < 4) {
    w[J] = _mm512_and_si512(shift_bytes<-2 * J>(crumbs), _mm512_set1_epi8(0x03));
    if constexpr (Bits == 3)
      w[J] = _mm512_or_si512(w[J],
                             _mm512_and_si512(shift_bytes<2 - J>(third), _mm512_set1_epi8(0x04)));
    add_narrow_word<Bits, J + 1>(w, crumbs, third);
  }
}

// Unpacks a record's codes into S/4 vectors of u8 (one per group of 4 inputs).
template <int Bits, int S>
inline void load_codes(const uint8_t* rec, __m512i* w) {
  if constexpr (Bits < 4) {
    // Word J: crumbs 2J..2J+1 of each byte, and (3 bits) the third bit J at bit 2.
    static_assert(S == 16, "2- and 3-bit codes in 16-input records");
    const __m512i third = Bits == 3 ? third_bits(rec + 64) : _mm512_setzero_si512();
    add_narrow_word<Bits, 0>(w, _mm512_loadu_si512(rec), third);
  } else if constexpr (Bits == 8) {
#pragma GCC unroll 8
    for (int j = 0; j < S / 4; ++j) w[j] = _mm512_loadu_si512(rec + 64 * j);
  } else {
    constexpr int NV = S / 8;
    const __m512i lo = _mm512_set1_epi8(0x0F);
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      __m512i raw = _mm512_loadu_si512(rec + 64 * v);
      w[v] = _mm512_and_si512(raw, lo);
      w[v + NV] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), lo);
    }
    if constexpr (Bits > 4) add_high_bits<Bits, S, 0>(w, _mm512_loadu_si512(rec + 64 * NV));
  }
}

// 16 f32 lanes 2^(e - 128) of a record's 16 e8m0 bytes, as e8m0_to_f32 (dequant.h) forms each:
// exponent bits for e >= 2, the subnormals below.
inline __m512 e8m0_16(const uint8_t* e16) {
  const __m512i e = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(e16)));
  const __m512i normal = _mm512_slli_epi32(_mm512_sub_epi32(e, _mm512_set1_epi32(1)), 23);
  const __m512i subnormal = _mm512_sllv_epi32(_mm512_set1_epi32(0x00200000), e);
  const __mmask16 small = _mm512_cmplt_epu32_mask(e, _mm512_set1_epi32(2));
  return _mm512_castsi512_ps(_mm512_mask_blend_epi32(small, normal, subnormal));
}

// A lookup-table format's codes, table value + 128 per index, in every 128-bit lane for
// vpshufb (index -> unsigned code; the zero point 128 is subtracted as for Q8_0).
template <QuantFormat F>
inline __m512i table_codes() {
  const __m128i values = _mm_loadu_si128(reinterpret_cast<const __m128i*>(F.table.data()));
  return _mm512_xor_si512(_mm512_broadcast_i32x4(values), _mm512_set1_epi8(-128));
}

// 16 f32 lanes of f16(d) * int8 factor, one per row of the group: d * sc or dmin * m, exact.
inline __m512 split_factor16(const uint8_t* d_f16, const uint8_t* factor_i8) {
  const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(d_f16)));
  const __m128i f = _mm_loadu_si128(reinterpret_cast<const __m128i*>(factor_i8));
  return _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(f)));
}

// The same for a nibble_factors area (Q2_K): High takes m (the high nibbles), else sc.
template <bool High>
inline __m512 split_nibble_factor16(const uint8_t* d_f16, const uint8_t* factors) {
  const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(d_f16)));
  const __m512i f =
      _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(factors)));
  const __m512i nibble =
      High ? _mm512_srli_epi32(f, 4) : _mm512_and_si512(f, _mm512_set1_epi32(0x0F));
  return _mm512_mul_ps(d, _mm512_cvtepi32_ps(nibble));
}

// A split-scale format's scale (d * sc) and minimum (dmin * m) of record s, all 16 rows, as its
// factor areas hold them.
template <QuantFormat F>
inline __m512 split_scale16(const uint8_t* group, const SplitScaleAreas& areas, int64_t s) {
  const uint8_t* d = group + areas.d + 32 * (s * F.sub_block / 256);
  if constexpr (F.nibble_factors) return split_nibble_factor16<false>(d, group + areas.sc + 16 * s);
  return split_factor16(d, group + areas.sc + 16 * s);
}
template <QuantFormat F>
inline __m512 split_min16(const uint8_t* group, const SplitScaleAreas& areas, int64_t s) {
  const uint8_t* dmin = group + areas.dmin + 32 * (s * F.sub_block / 256);
  if constexpr (F.nibble_factors)
    return split_nibble_factor16<true>(dmin, group + areas.m + 16 * s);
  return split_factor16(dmin, group + areas.m + 16 * s);
}

}  // namespace kiln::kernels::avx512
