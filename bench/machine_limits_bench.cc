// The machine's read bandwidth, the denominator of every "fraction of bandwidth" figure the
// benchmarks report: 1 GiB (far beyond any cache) read by 1 and 2 threads, each thread summing
// its own contiguous share with wide loads and independent accumulators so that only memory
// limits it. The instruction peaks are contract_ceiling_bench's BM_dots_only (int8 vpdpbusd)
// and instruction_rate_bench's BM_vfmadd231ps (f32 FMA); bench/closing_figures.sh runs all three.
// This host's bandwidth swings by up to 2x within minutes: run it beside the figure it divides.
#include <benchmark/benchmark.h>
#include <immintrin.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace {

constexpr size_t kBytes = size_t{1} << 30;

// One buffer for all runs, written once (non-zero, and faulted in before any timing).
uint8_t* buffer() {
  static uint8_t* data = [] {
    auto* p = static_cast<uint8_t*>(std::aligned_alloc(64, kBytes));
    if (p == nullptr) std::abort();
    for (size_t i = 0; i < kBytes; i += 64) std::memset(p + i, static_cast<int>(i >> 6), 64);
    return p;
  }();
  return data;
}

__attribute__((target("avx2"))) uint64_t sum_share(const uint8_t* b, const uint8_t* e) {
  __m256i s0 = _mm256_setzero_si256(), s1 = s0, s2 = s0, s3 = s0;
  for (; b + 128 <= e; b += 128) {
    s0 = _mm256_add_epi64(s0, _mm256_load_si256(reinterpret_cast<const __m256i*>(b)));
    s1 = _mm256_add_epi64(s1, _mm256_load_si256(reinterpret_cast<const __m256i*>(b + 32)));
    s2 = _mm256_add_epi64(s2, _mm256_load_si256(reinterpret_cast<const __m256i*>(b + 64)));
    s3 = _mm256_add_epi64(s3, _mm256_load_si256(reinterpret_cast<const __m256i*>(b + 96)));
  }
  const __m256i s = _mm256_add_epi64(_mm256_add_epi64(s0, s1), _mm256_add_epi64(s2, s3));
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

void BM_ReadBandwidth(benchmark::State& state) {
  const uint8_t* data = buffer();
  const size_t share = kBytes / static_cast<size_t>(state.threads());
  const uint8_t* begin = data + share * static_cast<size_t>(state.thread_index());
  for (auto _ : state) benchmark::DoNotOptimize(sum_share(begin, begin + share));
  // GB/s of all threads together over the real time in which they ran.
  using C = benchmark::Counter;
  state.counters["GB/s"] =
      C(static_cast<double>(kBytes) / 1e9, C::kIsIterationInvariantRate | C::kAvgThreads);
}

BENCHMARK(BM_ReadBandwidth)->Threads(1)->Threads(2)->UseRealTime()->MinTime(1.0);

}  // namespace

BENCHMARK_MAIN();
