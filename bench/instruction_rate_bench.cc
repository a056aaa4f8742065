// Throughput of the two instructions a BF16-weight matmul could be built on, on this CPU:
// AVX512_BF16's vdpbf16ps (16 lanes x 2 bf16 products = 64 flops) and AVX-512 vfmadd231ps
// (16 lanes x 1 f32 product = 32 flops), each over 16 independent accumulators so that only
// issue rate limits it. kiln runs BF16 weights on f32 FMA (exact products, no rounding of the
// activations) because on the CPUs it was measured on vdpbf16ps delivers fewer flops per second
// than FMA; this benchmark is how that is checked on another machine.
// GCC 12 flags _mm512_reduce_add_ps's intentionally undefined register as used uninitialized
// when it is inlined into a target("avx512...") function (GCC bug 105593, in its own header).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include "kiln/base/cpu_features.h"

namespace {

constexpr int kChains = 16;
constexpr int kRepeats = 64;  // instructions per chain per benchmark iteration

// Sixteen named accumulators (an array would be kept on the stack), each step opaque to the
// compiler so that nothing is folded or reordered away.
#define KILN_CHAINS(X) \
  X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
#define KILN_DECLARE(c) __m512 a##c = _mm512_setzero_ps();
#define KILN_KEEP(c) __asm__ volatile("" : "+v"(a##c));
#define KILN_SUM(c) sum = _mm512_add_ps(sum, a##c);

// One function per instruction: `setup` declares its operands w and x, `step(a)` is one
// instruction accumulating into a.
#define KILN_RATE_BLOCK(name, isa, setup, step) \
  __attribute__((target(isa))) float name() {   \
    KILN_CHAINS(KILN_DECLARE)                   \
    setup;                                      \
    for (int r = 0; r < kRepeats; ++r) {        \
      KILN_CHAINS(step)                         \
      KILN_CHAINS(KILN_KEEP)                    \
    }                                           \
    __m512 sum = _mm512_setzero_ps();           \
    KILN_CHAINS(KILN_SUM)                       \
    return _mm512_reduce_add_ps(sum);           \
  }

#define KILN_DPBF16_STEP(c) a##c = _mm512_dpbf16_ps(a##c, w, x);
#define KILN_FMA_STEP(c) a##c = _mm512_fmadd_ps(w, x, a##c);
// Operands: bf16 pairs of 2^-7, and the same value in f32.
KILN_RATE_BLOCK(dpbf16_block, "avx512f,avx512bf16",
                const __m512bh w = (__m512bh)_mm512_set1_epi32(0x3c003c00);
                const __m512bh x = w, KILN_DPBF16_STEP)
KILN_RATE_BLOCK(fma_block, "avx512f", const __m512 w = _mm512_set1_ps(0.0078125f);
                const __m512 x = w, KILN_FMA_STEP)

void run(benchmark::State& state, float (*block)(), double flops_per_instruction) {
  for (auto _ : state) {
    float out = block();
    benchmark::DoNotOptimize(out);
  }
  using C = benchmark::Counter;
  const double instructions = static_cast<double>(kChains) * kRepeats;
  state.counters["Ginstr/s"] = C(instructions / 1e9, C::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] =
      C(instructions * flops_per_instruction / 1e9, C::kIsIterationInvariantRate);
}

void BM_vdpbf16ps(benchmark::State& state) {
  if (!kiln::cpu_features().avx512bf16) {
    state.SkipWithError("no AVX512_BF16 on this CPU");
    return;
  }
  run(state, dpbf16_block, 64.0);
}
void BM_vfmadd231ps(benchmark::State& state) {
  if (!kiln::cpu_features().avx512f) {
    state.SkipWithError("no AVX-512 on this CPU");
    return;
  }
  run(state, fma_block, 32.0);
}

BENCHMARK(BM_vdpbf16ps);
BENCHMARK(BM_vfmadd231ps);

}  // namespace

BENCHMARK_MAIN();
