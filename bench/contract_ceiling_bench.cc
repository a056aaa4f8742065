// Instruction ceilings of the quantized matmul's arithmetic contract (matmul_kernels.h) on this
// CPU, to tell how much of a many-row matmul's speed the contract itself caps.
//
// Each variant is the inner loop of the AVX-512 pair tile (matmul_avx512.cc pair_tile_quant: 2
// groups x 4 rows, 8-bit codes, each broadcast activation word feeding two vpdpbusd) over
// operands that stay in L1, so that only instruction issue limits it:
//   - dots_only: the vpdpbusd and their loads, no float step at all (the int8 ceiling of any
//     contract that reads the same codes);
//   - contract_q4_k: the contract's step per 32-input sub-block with a minimum (cvt, mul, fma,
//     fnmadd per output), as Q4_K runs above 8 rows;
//   - contract_q6_k: the step per 16-input sub-block without a minimum (zero-point correction
//     as the dot chain's initial value), as Q6_K runs;
//   - block256_q4_k: what a contract with one activation scale per 256 inputs (llama.cpp's
//     q8_K) would do for Q4_K: each sub-block's int32 dot times its integer scale (vpmulld)
//     summed in int32, then one float step per 256 inputs, the minimums' products with the
//     code sums by vpdpwssd.
// GOP/s counts 2 x 16 columns x 4 inputs per vpdpbusd, so each variant's rate over dots_only's
// is the share of the int8 peak its contract leaves.
// GCC 12 flags its own AVX-512 intrinsics (_mm512_reduce_*, _mm512_cvtepi32_ps: a register
// left undefined on purpose) when they are inlined into a target("avx512...") function, as
// "may be" or "is" used uninitialized (GCC bug 105593). The header cannot be fixed from here.
#if defined(__GNUC__) && !defined(__clang__)  // clang has no -Wmaybe-uninitialized
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <cstdint>

#include "contract_ceiling_amx.h"
#include "kiln/base/cpu_features.h"

namespace {

constexpr int kRows = 4;     // rows of a pair tile (kPairTileRows)
constexpr int kRecords = 8;  // 32-input sub-blocks per pass: one 256-input super-block
constexpr int kPasses = 64;  // passes per benchmark iteration

// L1-resident operands laid out as the pair tile reads them: per group, records of 8 code
// vectors followed by their f32 scales and minimums; the activations block-major.
struct Operands {
  alignas(64) uint8_t codes[2][kRecords][8][64];
  alignas(64) float scale[2][kRecords][16];
  alignas(64) float minimum[2][kRecords][16];
  alignas(64) int32_t int_scale[2][kRecords][16];    // block256: 6-bit sub-block scales
  alignas(64) int16_t int_min[2][kRecords / 2][32];  // block256: minimums, pairs of sub-blocks
  alignas(64) float super_d[2][16], super_dmin[2][16];
  alignas(64) int8_t q[kRecords][kRows][32];
  alignas(64) float d[kRecords][kRows], ds[kRecords][kRows];
  alignas(64) int32_t corr[2 * kRecords][kRows];
  alignas(64) int32_t sum_pairs[kRecords / 2][kRows];  // block256: two int16 code sums
  float d256[kRows];
};

Operands make_operands() {
  Operands o{};
  for (int g = 0; g < 2; ++g)
    for (int r = 0; r < kRecords; ++r) {
      for (int j = 0; j < 8; ++j)
        for (int b = 0; b < 64; ++b)
          o.codes[g][r][j][b] = static_cast<uint8_t>((g + r + j + b) & 15);
      for (int c = 0; c < 16; ++c) {
        o.scale[g][r][c] = 1e-3f * static_cast<float>(1 + c);
        o.minimum[g][r][c] = 1e-4f * static_cast<float>(1 + c);
        o.int_scale[g][r][c] = (r + c) & 63;
      }
    }
  for (int r = 0; r < kRecords; ++r)
    for (int i = 0; i < kRows; ++i) {
      for (int b = 0; b < 32; ++b)
        o.q[r][i][b] = static_cast<int8_t>((r * 7 + i * 3 + b) % 255 - 127);
      o.d[r][i] = 0.01f;
      o.ds[r][i] = 0.02f;
    }
  return o;
}

#define KILN_VNNI __attribute__((target("avx512f,avx512bw,avx512vnni")))

KILN_VNNI inline __m512i broadcast_word(const int8_t* p) {
  int32_t v;
  __builtin_memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// The dot chains of one sub-block of S inputs (S / 4 words): dot0/dot1 are the two groups'
// int32 dots for each of the 4 rows, added to the values they hold.
template <int S>
KILN_VNNI inline void sub_block_dots(const Operands& o, int rec, int half, __m512i* dot0,
                                     __m512i* dot1) {
#pragma GCC unroll 8
  for (int j = 0; j < S / 4; ++j) {
    const int word = half * (S / 4) + j;
    const __m512i w0 = _mm512_load_si512(o.codes[0][rec][word]);
    const __m512i w1 = _mm512_load_si512(o.codes[1][rec][word]);
#pragma GCC unroll 4
    for (int i = 0; i < kRows; ++i) {
      const __m512i x = broadcast_word(&o.q[rec][i][half * S + 4 * j]);
      dot0[i] = _mm512_dpbusd_epi32(dot0[i], w0, x);
      dot1[i] = _mm512_dpbusd_epi32(dot1[i], w1, x);
    }
  }
}

KILN_VNNI float dots_only(const Operands& o) {
  __m512i dot0[kRows], dot1[kRows];
  for (int i = 0; i < kRows; ++i) dot0[i] = dot1[i] = _mm512_setzero_si512();
  for (int p = 0; p < kPasses; ++p) {
    for (int rec = 0; rec < kRecords; ++rec) sub_block_dots<32>(o, rec, 0, dot0, dot1);
    __asm__ volatile("" ::: "memory");  // reload the operands: nothing is hoisted across passes
  }
  __m512i sum = _mm512_setzero_si512();
  for (int i = 0; i < kRows; ++i) sum = _mm512_add_epi32(sum, _mm512_add_epi32(dot0[i], dot1[i]));
  return static_cast<float>(_mm512_reduce_add_epi32(sum));
}

KILN_VNNI float contract_q4_k(const Operands& o) {
  __m512 acc0[kRows], acc1[kRows];
  for (int i = 0; i < kRows; ++i) acc0[i] = acc1[i] = _mm512_setzero_ps();
  for (int p = 0; p < kPasses; ++p) {
    for (int rec = 0; rec < kRecords; ++rec) {
      __m512i dot0[kRows], dot1[kRows];
#pragma GCC unroll 4
      for (int i = 0; i < kRows; ++i) dot0[i] = dot1[i] = _mm512_setzero_si512();
      sub_block_dots<32>(o, rec, 0, dot0, dot1);
      const __m512 scale0 = _mm512_load_ps(o.scale[0][rec]);
      const __m512 scale1 = _mm512_load_ps(o.scale[1][rec]);
#pragma GCC unroll 4
      for (int i = 0; i < kRows; ++i) {
        const __m512 di = _mm512_set1_ps(o.d[rec][i]);
        const __m512 dsi = _mm512_set1_ps(o.ds[rec][i]);
        acc0[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot0[i]), _mm512_mul_ps(scale0, di), acc0[i]);
        acc1[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot1[i]), _mm512_mul_ps(scale1, di), acc1[i]);
        acc0[i] = _mm512_fnmadd_ps(_mm512_load_ps(o.minimum[0][rec]), dsi, acc0[i]);
        acc1[i] = _mm512_fnmadd_ps(_mm512_load_ps(o.minimum[1][rec]), dsi, acc1[i]);
      }
    }
    __asm__ volatile("" ::: "memory");
  }
  __m512 sum = _mm512_setzero_ps();
  for (int i = 0; i < kRows; ++i) sum = _mm512_add_ps(sum, _mm512_add_ps(acc0[i], acc1[i]));
  return _mm512_reduce_add_ps(sum);
}

KILN_VNNI float contract_q6_k(const Operands& o) {
  __m512 acc0[kRows], acc1[kRows];
  for (int i = 0; i < kRows; ++i) acc0[i] = acc1[i] = _mm512_setzero_ps();
  for (int p = 0; p < kPasses; ++p) {
    for (int rec = 0; rec < kRecords; ++rec) {
      for (int half = 0; half < 2; ++half) {
        const int sub = 2 * rec + half;
        __m512i dot0[kRows], dot1[kRows];
#pragma GCC unroll 4
        for (int i = 0; i < kRows; ++i) dot0[i] = dot1[i] = _mm512_set1_epi32(o.corr[sub][i]);
        sub_block_dots<16>(o, rec, half, dot0, dot1);
        const __m512 scale0 = _mm512_load_ps(o.scale[0][rec]);
        const __m512 scale1 = _mm512_load_ps(o.scale[1][rec]);
#pragma GCC unroll 4
        for (int i = 0; i < kRows; ++i) {
          const __m512 di = _mm512_set1_ps(o.d[rec][i]);
          acc0[i] =
              _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot0[i]), _mm512_mul_ps(scale0, di), acc0[i]);
          acc1[i] =
              _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot1[i]), _mm512_mul_ps(scale1, di), acc1[i]);
        }
      }
    }
    __asm__ volatile("" ::: "memory");
  }
  __m512 sum = _mm512_setzero_ps();
  for (int i = 0; i < kRows; ++i) sum = _mm512_add_ps(sum, _mm512_add_ps(acc0[i], acc1[i]));
  return _mm512_reduce_add_ps(sum);
}

KILN_VNNI float block256_q4_k(const Operands& o) {
  __m512 acc0[kRows], acc1[kRows];
  for (int i = 0; i < kRows; ++i) acc0[i] = acc1[i] = _mm512_setzero_ps();
  for (int p = 0; p < kPasses; ++p) {
    __m512i isum0[kRows], isum1[kRows], msum0[kRows], msum1[kRows];
#pragma GCC unroll 4
    for (int i = 0; i < kRows; ++i) {
      isum0[i] = isum1[i] = msum0[i] = msum1[i] = _mm512_setzero_si512();
    }
    for (int rec = 0; rec < kRecords; ++rec) {
      __m512i dot0[kRows], dot1[kRows];
#pragma GCC unroll 4
      for (int i = 0; i < kRows; ++i) dot0[i] = dot1[i] = _mm512_setzero_si512();
      sub_block_dots<32>(o, rec, 0, dot0, dot1);
      const __m512i sc0 = _mm512_load_si512(o.int_scale[0][rec]);
      const __m512i sc1 = _mm512_load_si512(o.int_scale[1][rec]);
#pragma GCC unroll 4
      for (int i = 0; i < kRows; ++i) {
        isum0[i] = _mm512_add_epi32(isum0[i], _mm512_mullo_epi32(dot0[i], sc0));
        isum1[i] = _mm512_add_epi32(isum1[i], _mm512_mullo_epi32(dot1[i], sc1));
      }
    }
    // The minimums: per output, sum over sub-blocks of m * code sum, two sub-blocks per vpdpwssd.
    for (int pair = 0; pair < kRecords / 2; ++pair) {
      const __m512i m0 = _mm512_load_si512(o.int_min[0][pair]);
      const __m512i m1 = _mm512_load_si512(o.int_min[1][pair]);
#pragma GCC unroll 4
      for (int i = 0; i < kRows; ++i) {
        const __m512i sums = _mm512_set1_epi32(o.sum_pairs[pair][i]);
        msum0[i] = _mm512_dpwssd_epi32(msum0[i], m0, sums);
        msum1[i] = _mm512_dpwssd_epi32(msum1[i], m1, sums);
      }
    }
    const __m512 d0 = _mm512_load_ps(o.super_d[0]), d1 = _mm512_load_ps(o.super_d[1]);
    const __m512 dmin0 = _mm512_load_ps(o.super_dmin[0]), dmin1 = _mm512_load_ps(o.super_dmin[1]);
#pragma GCC unroll 4
    for (int i = 0; i < kRows; ++i) {
      const __m512 di = _mm512_set1_ps(o.d256[i]);
      acc0[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum0[i]), _mm512_mul_ps(d0, di), acc0[i]);
      acc1[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum1[i]), _mm512_mul_ps(d1, di), acc1[i]);
      acc0[i] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum0[i]), _mm512_mul_ps(dmin0, di), acc0[i]);
      acc1[i] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(msum1[i]), _mm512_mul_ps(dmin1, di), acc1[i]);
    }
    __asm__ volatile("" ::: "memory");
  }
  __m512 sum = _mm512_setzero_ps();
  for (int i = 0; i < kRows; ++i) sum = _mm512_add_ps(sum, _mm512_add_ps(acc0[i], acc1[i]));
  return _mm512_reduce_add_ps(sum);
}

// Each thread (Threads(2): both cores) runs on its own operands.
void run(benchmark::State& state, float (*loop)(const Operands&)) {
  if (!kiln::cpu_features().avx512vnni) {
    state.SkipWithError("no AVX512_VNNI on this CPU");
    return;
  }
  const Operands o = make_operands();
  for (auto _ : state) {
    float out = loop(o);
    benchmark::DoNotOptimize(out);
  }
  // vpdpbusd per pass: 8 records x 8 words x 2 groups x 4 rows, each 16 x 4 multiply-adds.
  const double ops = 2.0 * 16 * 4 * (kRecords * 8 * 2 * kRows) * kPasses;
  // Both threads' counts, over the real time in which both ran (Google Benchmark would count
  // each thread's share twice: it sums the threads' counters and scales each by the iterations
  // of all threads).
  using C = benchmark::Counter;
  state.counters["GOP/s"] = C(ops / 1e9, C::kIsIterationInvariantRate | C::kAvgThreads);
}

void BM_dots_only(benchmark::State& s) { run(s, dots_only); }
void BM_contract_q4_k(benchmark::State& s) { run(s, contract_q4_k); }
void BM_contract_q6_k(benchmark::State& s) { run(s, contract_q6_k); }
void BM_block256_q4_k(benchmark::State& s) { run(s, block256_q4_k); }

// The AMX loops (contract_ceiling_amx.h): each thread on its own operands; `ops` per pass.
void run_amx(benchmark::State& state, float (*loop)(amx_loops::Operands&), double ops_per_record,
             bool bf16) {
  const kiln::AmxStatus& amx = kiln::amx_status();
  if (!amx.usable || (bf16 && !amx.bf16)) {
    state.SkipWithError(amx.usable ? "no AMX-BF16 on this CPU" : amx.why.c_str());
    return;
  }
  amx_loops::Operands* o = amx_loops::make_operands();
  for (auto _ : state) {
    float out = loop(*o);
    benchmark::DoNotOptimize(out);
  }
  delete o;
  const double ops = ops_per_record * amx_loops::kRecords * amx_loops::kPasses;
  using C = benchmark::Counter;
  state.counters["GOP/s"] = C(ops / 1e9, C::kIsIterationInvariantRate | C::kAvgThreads);
}

// Operations per 32-input record: 2 x rows x columns x 32.
constexpr double kOneTile = 2.0 * 16 * 16 * 32;
void BM_amx_dots_only(benchmark::State& s) {
  run_amx(s, amx_loops::amx_dots_only, 2 * kOneTile, false);
}
void BM_amx_tiles_stored(benchmark::State& s) {
  run_amx(s, amx_loops::amx_tiles_stored, kOneTile, false);
}
void BM_amx_float_step(benchmark::State& s) {
  run_amx(s, amx_loops::amx_float_step, kOneTile, false);
}
void BM_amx_contract_q4_k_serial(benchmark::State& s) {
  run_amx(s, amx_loops::amx_contract_q4_k_serial, kOneTile, false);
}
void BM_amx_contract_q4_k(benchmark::State& s) {
  run_amx(s, amx_loops::amx_contract_q4_k, kOneTile, false);
}
void BM_amx_contract_q4_k_deep(benchmark::State& s) {
  run_amx(s, amx_loops::amx_contract_q4_k_deep, kOneTile, false);
}
void BM_bf16_tiles_only(benchmark::State& s) {
  run_amx(s, amx_loops::bf16_tiles_only, 4 * kOneTile, true);
}
void BM_bf16_decompress_32_rows(benchmark::State& s) {
  run_amx(s, amx_loops::bf16_decompress_rows<32>, 4 * kOneTile, true);
}
void BM_bf16_decompress_64_rows(benchmark::State& s) {
  run_amx(s, amx_loops::bf16_decompress_rows<64>, 4 * kOneTile, true);
}

BENCHMARK(BM_dots_only)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_contract_q4_k)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_contract_q6_k)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_block256_q4_k)->Threads(1)->Threads(2)->UseRealTime();
void BM_bf16_lut_1_row(benchmark::State& s) {
  run_amx(s, amx_loops::bf16_lut_rows<1>, kOneTile / 16, true);
}
void BM_bf16_lut_32_rows(benchmark::State& s) {
  run_amx(s, amx_loops::bf16_lut_rows<32>, 2 * kOneTile, true);
}

BENCHMARK(BM_amx_dots_only)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_amx_tiles_stored)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_amx_float_step)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_amx_contract_q4_k_serial)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_amx_contract_q4_k)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_amx_contract_q4_k_deep)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_bf16_tiles_only)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_bf16_decompress_32_rows)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_bf16_decompress_64_rows)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_bf16_lut_1_row)->Threads(1)->Threads(2)->UseRealTime();
BENCHMARK(BM_bf16_lut_32_rows)->Threads(1)->Threads(2)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
