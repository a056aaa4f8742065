// AVX2 tile kernels (no VNNI): int8 dot products with vpmaddubsw + vpmaddwd, FMA for float
// weights. Quantized weights run these tiles at 1 row (decode), where one tile reads each group
// once from memory; from 2 rows the driver takes the many-row tiles of
// matmul_gemm_avx2.cc (many_row_tiles in matmul.cc). Bit-identical to matmul_scalar.cc: the integer
// dots are exact (no 16-bit saturation: 2- to 6-bit codes give pair sums <= 2 * 63 * 127, and pairs
// are added in int16 only as far as avx2::words_per_madd allows; Q8_0 codes are turned back into
// signed values and multiplied with the sign trick, pair sums <= 2 * 128 * 127), and the float
// operations are those of the contract in matmul_kernels.h.
#include <immintrin.h>

#include <type_traits>
#include <utility>

#include "kiln/base/error.h"
#include "kiln/kernels/matmul_avx2_codes.h"
#include "kiln/kernels/matmul_kernels.h"
#include "kiln/kernels/packed_weight.h"

namespace kiln::kernels {
namespace {

using avx2::load_i32;
using avx2::words_per_madd;

// Exact int16 pair sums of one 4-input word: code x activation products, pairs added.
template <bool Signed8>
inline __m256i pairs4(__m256i w, __m256i a) {
  if constexpr (Signed8) {  // w holds code - 128 as int8
    return _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(a, w));
  } else {
    return _mm256_maddubs_epi16(w, a);
  }
}

// Words V and V + S/8 of column half h (columns 8h .. 8h + 7) of a packed record of 4-, 5- or
// 6-bit codes (packed_weight.h), as u8 with vector byte 4r + t = code of column 8h + r, input
// 4J + t: the low and the high nibbles of raw vector V, each with its bits above 4 from the
// record's plane (bit J, or bits 2J and 2J + 1, of input group J).
template <int Bits, int S, int V>
inline void code_pair(const uint8_t* rec, int h, __m256i plane, __m256i& lo, __m256i& hi) {
  constexpr int NV = S / 8;
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + 64 * V + 32 * h));
  lo = _mm256_and_si256(raw, low4);
  hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
  if constexpr (Bits > 4) {
    // Word J's high bits: bit J (5-bit) or bits 2J, 2J + 1 (6-bit) of each plane byte, to bit 4.
    constexpr int step = Bits == 5 ? 1 : 2;
    const __m256i mask = _mm256_set1_epi8(Bits == 5 ? 0x10 : 0x30);
    lo = _mm256_or_si256(lo, _mm256_and_si256(avx2::shift_bytes<4 - step * V>(plane), mask));
    hi = _mm256_or_si256(hi, _mm256_and_si256(avx2::shift_bytes<4 - step*(V + NV)>(plane), mask));
  }
}

// One row (decode; Split: K-quant scales as factors after the records, packed_weight.h;
// otherwise an f16 scale per column in each record). Both 8-column halves of each word are taken
// together, so each activation word is broadcast once and feeds both halves' vpmaddubsw, and each
// raw vector is loaded once; walking the halves one after the other, GCC kept the record's 8
// broadcasts on the stack between them and loaded each raw vector twice (64 vector loads per Q4_K
// record against 26 here; llvm-mca, znver3: 34 cycles per record, bound by the load pipes,
// against 27). The int16 sums take the words in the order v, v + S/8, ..., never more than
// words_per_madd of them, so the int32 dots are exact, and the float steps are the contract's.
//
// Lookup-table formats (4-bit indices) translate each word with vpshufb to the table's int8
// values and take the sign trick (signed_dot4), one word per vpmaddwd: their dot is the plain
// signed sum, which is the contract's (value + 128) * q - 128 * sum(q).
template <QuantFormat F>
void tile_quant_row(const uint8_t* group, const ActView& a, int64_t row, float* tile) {
  constexpr int Bits = F.bits, S = F.sub_block, ZP = F.zero_point;
  constexpr bool Min = F.has_min, Split = F.split_scales, Table = F.has_table;
  constexpr bool E8M0 = F.record_scale == RecordScale::E8M0;
  static_assert(!Table || Bits == 4, "table indices are 4-bit");
  constexpr int code_bytes = F.code_bytes();
  constexpr int record_bytes = F.record_bytes();
  constexpr int NV = S / 8;                  // raw vectors per half (4-6 bits)
  constexpr int G = words_per_madd<Bits>();  // words per int16 sum
  // Raw vectors (two words each) per int16 sum: all of a 16-input record's when fewer.
  constexpr int kPairsPerMadd = G / 2 < NV ? G / 2 : NV;
  const int64_t nsub = a.k / S;
  const SplitScaleAreas areas = split_scale_areas(code_bytes, S, Min, F.nibble_factors, a.k);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  // The super-block's f16 d (and dmin) as f32, converted once per super-block rather than per
  // record (split-scale types).
  __m256 super_d[2] = {}, super_dmin[2] = {};
  for (int64_t s = 0; s < nsub; ++s) {
    const uint8_t* rec = group + s * record_bytes;
    // The first row of a group brings it from memory (later ones reread it from L1): it asks
    // for the stream 4 KiB ahead, as the AVX-512 tile does. A/B at 1 row (alternating calls, 2
    // threads): Q4_K 1.05-1.16x and Q6_K 1.13-1.28x on Llama 3.1 8B shapes, Q8_0 and Q5_0 on the
    // default model's 1.04-1.10x; 1 to 16 KiB ahead measured alike.
    // Near the end of the records the stream continues with the next group's records (the
    // next group in the chunk is the next in memory), past this group's scale areas, which the
    // loop has read by then: asking for those instead left each group's first 4 KiB to the
    // hardware. A/B at 1 row (alternating calls, 2 threads): 1.05-1.06x on Llama 3.1 8B's
    // 4096-input Q4_K weights (gate, up, QKV: 37 KiB groups), 1.00x on the 14336-input ones.
    if (row == 0) {
      const uint8_t* at = rec;
      if constexpr (Split)
        if (rec + 4096 >= group + areas.sc) at += areas.end - areas.sc;
      avx2::prefetch_ahead<record_bytes, 4096, 3>(at);  // into L1
    }
    const int64_t blk = s * S / 32;
    const int64_t super = s * S / 256;
    const int8_t* qa = a.q_at(row, s * S);
    __m256i dot[2];
    if constexpr (Min || Bits == 8 || Table) {
      dot[0] = _mm256_setzero_si256();
    } else {
      const int32_t sum = S == 32 ? a.s32_at(row, blk) : a.s16_at(row, s);
      dot[0] = _mm256_set1_epi32(-ZP * sum);
    }
    dot[1] = dot[0];
    if constexpr (Bits == 8) {
#pragma GCC unroll 8
      for (int j = 0; j < S / 4; ++j) {
        const __m256i av = _mm256_set1_epi32(load_i32(qa + 4 * j));
        for (int h = 0; h < 2; ++h) {
          const __m256i w = _mm256_xor_si256(
              _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + 64 * j + 32 * h)),
              _mm256_set1_epi8(-128));
          dot[h] = _mm256_add_epi32(dot[h], _mm256_madd_epi16(pairs4<true>(w, av), ones));
        }
      }
    } else if constexpr (Bits < 4) {
      // A 16-input record of 2- or 3-bit codes: four words per column half, whose pairs (at
      // most 2 * 7 * 127) all add in int16 before one vpmaddwd.
      static_assert(S == 16 && G >= S / 4);
      __m256i av[S / 4];
      for (int j = 0; j < S / 4; ++j) av[j] = _mm256_set1_epi32(load_i32(qa + 4 * j));
      for (int h = 0; h < 2; ++h) {
        __m256i w[S / 4];
        avx2::narrow_words<Bits>(rec, h, w);
        __m256i p16 = _mm256_maddubs_epi16(w[0], av[0]);
        for (int j = 1; j < S / 4; ++j)
          p16 = _mm256_add_epi16(p16, _mm256_maddubs_epi16(w[j], av[j]));
        dot[h] = _mm256_add_epi32(dot[h], _mm256_madd_epi16(p16, ones));
      }
    } else {
      __m256i plane[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()};
      if constexpr (Bits > 4)
        for (int h = 0; h < 2; ++h)
          plane[h] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + 64 * NV + 32 * h));
      __m256i p16[2];
      auto raw_vector = [&](auto v_constant) {
        constexpr int V = decltype(v_constant)::value;
        const __m256i a_lo = _mm256_set1_epi32(load_i32(qa + 4 * V));
        const __m256i a_hi = _mm256_set1_epi32(load_i32(qa + 4 * (V + NV)));
        for (int h = 0; h < 2; ++h) {
          __m256i lo, hi;
          code_pair<Bits, S, V>(rec, h, plane[h], lo, hi);
          if constexpr (Table) {
            const __m256i lut = avx2::table_lut(F.table.data());
            dot[h] = _mm256_add_epi32(
                dot[h], _mm256_add_epi32(avx2::signed_dot4(_mm256_shuffle_epi8(lut, lo), a_lo),
                                         avx2::signed_dot4(_mm256_shuffle_epi8(lut, hi), a_hi)));
            continue;
          }
          const __m256i pair =
              _mm256_add_epi16(_mm256_maddubs_epi16(lo, a_lo), _mm256_maddubs_epi16(hi, a_hi));
          p16[h] = V % kPairsPerMadd == 0 ? pair : _mm256_add_epi16(p16[h], pair);
          if constexpr (V % kPairsPerMadd == kPairsPerMadd - 1)
            dot[h] = _mm256_add_epi32(dot[h], _mm256_madd_epi16(p16[h], ones));
        }
      };
      [&]<int... V>(std::integer_sequence<int, V...>) {
        (raw_vector(std::integral_constant<int, V>{}), ...);
      }
      (std::make_integer_sequence<int, NV>{});
    }
    if constexpr (Split) {
      if (s % (256 / S) == 0) {
        for (int h = 0; h < 2; ++h) {
          super_d[h] = avx2::split_d8(group + areas.d + 32 * super, h);
          if constexpr (Min) super_dmin[h] = avx2::split_d8(group + areas.dmin + 32 * super, h);
        }
      }
    }
    for (int h = 0; h < 2; ++h) {
      __m256 scale;
      __m256 mn;
      if constexpr (Split) {
        scale = avx2::split_scale8<F.nibble_factors>(super_d[h], group, areas, s, h);
        if constexpr (Min)
          mn = avx2::split_min8<F.nibble_factors>(super_dmin[h], group, areas, s, h);
      } else if constexpr (E8M0) {
        scale = avx2::e8m0_8(rec + code_bytes + 8 * h);
      } else {
        scale = _mm256_cvtph_ps(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + code_bytes + 16 * h)));
        if constexpr (Min)  // the record's f16 minimums follow its scales
          mn = _mm256_cvtph_ps(
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + code_bytes + 32 + 16 * h)));
      }
      const __m256 t = _mm256_mul_ps(scale, _mm256_set1_ps(a.d_at(row, blk)));
      acc[h] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[h]), t, acc[h]);
      if constexpr (Min) {
        // The contract's d_b * sum of the sub-block's codes (Q2_K: 16 inputs).
        const float msum =
            S == 32 ? a.ds_at(row, blk) : a.d_at(row, blk) * static_cast<float>(a.s16_at(row, s));
        acc[h] = _mm256_fnmadd_ps(mn, _mm256_set1_ps(msum), acc[h]);
      }
    }
  }
  _mm256_storeu_ps(tile, acc[0]);
  _mm256_storeu_ps(tile + 8, acc[1]);
}

// Row by row (each later row rereads the group from L1). From 2 rows the driver takes the
// many-row tiles of matmul_gemm_avx2.cc for every quantized type, so this runs at 1 row.
template <QuantFormat F>
void tile_quant(const uint8_t* group, const ActView& a, int64_t row0, int mt, float* tile) {
  for (int i = 0; i < mt; ++i) tile_quant_row<F>(group, a, row0 + i, tile + 16 * i);
}

template <DType T>
inline __m256 load_float8(const uint8_t* p) {
  if constexpr (T == DType::F32) {
    // (As an integer load: the same bytes, without a cast of bytes to a float pointer.)
    return _mm256_castsi256_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  } else if constexpr (T == DType::F16) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  } else {
    __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
}

template <DType T, int MT>
void tile_float_rows(const uint8_t* group, const ActView& a, int64_t row0, float* tile) {
  constexpr int eb = T == DType::F32 ? 4 : 2;
  __m256 acc[MT][2];
  for (int i = 0; i < MT; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  for (int64_t k = 0; k < a.k; ++k) {
    __m256 w0 = load_float8<T>(group + k * 16 * eb),
           w1 = load_float8<T>(group + k * 16 * eb + 8 * eb);
    for (int i = 0; i < MT; ++i) {
      __m256 x = _mm256_set1_ps(a.x[(row0 + i) * a.x_stride + k]);
      acc[i][0] = _mm256_fmadd_ps(x, w0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(x, w1, acc[i][1]);
    }
  }
  for (int i = 0; i < MT; ++i) {
    _mm256_storeu_ps(tile + 16 * i, acc[i][0]);
    _mm256_storeu_ps(tile + 16 * i + 8, acc[i][1]);
  }
}

template <DType T>
void tile_float(const uint8_t* group, const ActView& a, int64_t row0, int mt, float* tile) {
  int i = 0;
  for (; i + 4 <= mt; i += 4) tile_float_rows<T, 4>(group, a, row0 + i, tile + 16 * i);
  for (; i < mt; ++i) tile_float_rows<T, 1>(group, a, row0 + i, tile + 16 * i);
}

inline float hmax8(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}

}  // namespace

TileFn tile_fn_avx2(DType t) {
  switch (t) {
    case DType::F32:
      return tile_float<DType::F32>;
    case DType::F16:
      return tile_float<DType::F16>;
    case DType::BF16:
      return tile_float<DType::BF16>;
    default:
      break;
  }
  TileFn f = visit_quant_format(
      t, []<QuantFormat F>() -> TileFn { return tile_quant<F>; }, TileFn{nullptr});
  KILN_CHECK(f != nullptr, "matmul: no kernel for {} weights", dtype_name(t));
  return f;
}

void quantize_row_avx2(const float* x, int64_t k, int64_t stride, int8_t* q, float* d, int32_t* s16,
                       int32_t* s32, float* ds) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
  for (int64_t b = 0; b < k / 32; ++b) {
    __m256 v[4];
    __m256 amax = _mm256_setzero_ps();
    for (int j = 0; j < 4; ++j) {
      v[j] = _mm256_loadu_ps(x + 32 * b + 8 * j);
      amax = _mm256_max_ps(_mm256_and_ps(v[j], abs_mask), amax);  // NaN keeps amax
    }
    float m = hmax8(amax);
    float inv = m > 0.0f ? 127.0f / m : 0.0f;
    const float db = m / 127.0f;
    d[b * stride] = db;
    alignas(32) int32_t c[32];
    for (int j = 0; j < 4; ++j) {
      __m256i cj = _mm256_cvtps_epi32(_mm256_mul_ps(v[j], _mm256_set1_ps(inv)));
      _mm256_store_si256(reinterpret_cast<__m256i*>(c + 8 * j),
                         _mm256_min_epi32(_mm256_max_epi32(cj, lo), hi));
    }
    int32_t sums[2] = {0, 0};
    for (int j = 0; j < 32; ++j) {
      q[32 * b * stride + j] = static_cast<int8_t>(c[j]);
      sums[j / 16] += c[j];
    }
    s16[2 * b * stride] = sums[0];
    s16[(2 * b + 1) * stride] = sums[1];
    s32[b * stride] = sums[0] + sums[1];
    ds[b * stride] = db * static_cast<float>(sums[0] + sums[1]);
  }
}

}  // namespace kiln::kernels
