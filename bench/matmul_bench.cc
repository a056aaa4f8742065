// GEMV/GEMM over packed weights with the default model's shapes (Gemma 3 270M Q4_K_M):
//   q 640->1024 q5_0, k 640->256 q5_0, v 640->256 q8_0, o 1024->640 q4_k,
//   gate/up 640->2048 q5_0 (and merged 640->4096), down 2048->640 q6_k / q4_k,
//   LM head 640->262144 q8_0 (matmul and greedy matmul_argmax); and the q projection with
//   BF16 and F16 weights (f32 FMA), as other models store them. Many rows (prefill, batched
//   decode; m = 8..512): Llama-3.2-1B's FFN shapes, 2048->8192 and 8192->2048, Q4_K and Q6_K.
//   Decode (m = 1, 8, 32): Llama-3.1-8B's FFN shapes, 4096->14336 and 14336->4096.
// Counters: GB/s of weight bytes read, GOP/s (2*m*N*K per call), and their fractions of the
// machine limits (bw_frac, ops_frac). Small weights are rotated through enough copies (~256 MB)
// that, like a real decode step, they come from DRAM rather than cache (KILN_MATMUL_BENCH_HOT=1:
// one copy, read from cache when it fits: the instruction ceiling).
// Limits default to figures measured on the Zen 4 host by machine_limits_bench and
// contract_ceiling_bench (2 threads: ~26 GB/s,
// ~1120 GOP/s int8 VNNI, ~337 GFLOP/s f32 FMA; 1 thread: half); override with KILN_LIMIT_GBS /
// KILN_LIMIT_GOPS / KILN_LIMIT_GFLOPS (the 2-thread figures). Quantized weights are measured
// against the VNNI peak, float weights against the FMA peak.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kiln/base/cpu_features.h"
#include "kiln/base/half.h"
#include "kiln/base/thread_pool.h"
#include "kiln/kernels/matmul.h"
#include "kiln/kernels/matmul_kernels.h"

namespace kiln::kernels {

double env_or(const char* name, double fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? std::atof(v) : fallback;
}
namespace {

double limit_gbs(int nth) { return env_or("KILN_LIMIT_GBS", 26.0) * (nth >= 2 ? 1.0 : 0.5); }
double limit_gops(DType t, int nth) {
  const double share = nth >= 2 ? 1.0 : 0.5;
  if (t == DType::BF16 || t == DType::F16 || t == DType::F32)
    return env_or("KILN_LIMIT_GFLOPS", 337.0) * share;
  return env_or("KILN_LIMIT_GOPS", 1120.0) * share;
}

std::vector<uint8_t> random_rows(DType t, int64_t n, int64_t k, uint32_t seed) {
  std::mt19937 rng(seed);
  const DTypeInfo& info = dtype_info(t);
  std::vector<uint8_t> out(dtype_bytes(t, k) * n);
  if (t == DType::BF16 || t == DType::F16) {  // normal values (random bits would be NaN-heavy)
    std::normal_distribution<float> normal(0.0f, 0.05f);
    for (size_t i = 0; i < out.size() / 2; ++i) {
      uint16_t h = t == DType::BF16 ? f32_to_bf16(normal(rng)) : f32_to_f16(normal(rng));
      std::memcpy(&out[2 * i], &h, 2);
    }
    return out;
  }
  for (auto& b : out) b = static_cast<uint8_t>(rng());
  int off = t == DType::Q6_K ? 208 : 0;
  for (size_t b = 0; b < out.size() / info.block_bytes; ++b) {
    uint16_t h = f32_to_f16(0.001f + 0.001f * (rng() % 16));
    std::memcpy(&out[b * info.block_bytes + off], &h, 2);
    if (t == DType::Q4_K || t == DType::Q5_K) std::memcpy(&out[b * info.block_bytes + 2], &h, 2);
  }
  return out;
}

struct Weights {
  std::vector<PackedWeight> copies;
};

// Packed copies of one random weight, enough to exceed the caches; cached across benchmarks.
const Weights& weights(DType t, int64_t n, int64_t k, bool merged_gate_up) {
  static std::vector<std::pair<std::string, Weights>> cache;
  std::string key = fmt::format("{}:{}:{}:{}", dtype_name(t), n, k, merged_gate_up);
  for (auto& [name, w] : cache)
    if (name == key) return w;
  Weights w;
  size_t one = dtype_bytes(t, k) * n;
  // KILN_MATMUL_BENCH_HOT=1: one copy, so a weight that fits the caches is read from them and
  // the rate is the kernel's instruction ceiling at that m rather than the memory's.
  size_t copies = env_or("KILN_MATMUL_BENCH_HOT", 0) != 0
                      ? 1
                      : std::max<size_t>(1, std::min<size_t>(256, (256u << 20) / one));
  auto rows = random_rows(t, n, k, 7);
  Tensor src = Tensor::borrow(t, Shape{n, k}, rows.data());
  for (size_t c = 0; c < copies; ++c) {
    if (merged_gate_up) {
      Tensor half = src.slice_rows(0, n / 2);
      w.copies.push_back(PackedWeight::pack_concat({half, src.slice_rows(n / 2, n)}));
    } else {
      w.copies.push_back(PackedWeight::pack(src));
    }
  }
  cache.emplace_back(key, std::move(w));
  return cache.back().second;
}

enum class Mode { Matmul, Argmax };

void run(benchmark::State& state, DType t, int64_t n, int64_t k, Mode mode, bool merged) {
  const int64_t m = state.range(0);
  const int nth = static_cast<int>(state.range(1));
  const Weights& w = weights(t, n, k, merged);
  std::vector<float> x(m * k), y(m * n);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  for (auto& v : x) v = normal(rng);
  std::vector<int32_t> ids(m);
  size_t scratch_bytes = mode == Mode::Argmax ? matmul_argmax_scratch_bytes(w.copies[0], m, nth)
                                              : matmul_scratch_bytes(w.copies[0], m);
  std::vector<uint8_t> scratch(scratch_bytes + 64);
  ThreadPool pool(nth);
  SpinBarrier barrier(nth);
  size_t c = 0;
  for (auto _ : state) {
    const PackedWeight& pw = w.copies[c];
    c = c + 1 == w.copies.size() ? 0 : c + 1;
    pool.run([&](int tid, int nt) {
      ExecContext ctx{tid, nt, nt > 1 ? &barrier : nullptr};
      if (mode == Mode::Argmax) {
        matmul_argmax(pw, x.data(), m, ids.data(), scratch.data(), ctx);
      } else {
        matmul(pw, x.data(), m, y.data(), nullptr, scratch.data(), ctx);
      }
    });
    benchmark::DoNotOptimize(y.data());
    benchmark::DoNotOptimize(ids.data());
  }
  const double bytes = static_cast<double>(w.copies[0].bytes());
  const double ops = 2.0 * m * n * k;
  using C = benchmark::Counter;
  state.counters["GB/s"] = C(bytes / 1e9, C::kIsIterationInvariantRate);
  state.counters["GOP/s"] = C(ops / 1e9, C::kIsIterationInvariantRate);
  state.counters["bw_frac"] = C(bytes / 1e9 / limit_gbs(nth), C::kIsIterationInvariantRate);
  state.counters["ops_frac"] = C(ops / 1e9 / limit_gops(t, nth), C::kIsIterationInvariantRate);
  state.SetLabel(fmt::format("{} {} limits {:.0f} GB/s {:.0f} GOP/s", isa_name(active_isa()),
                             w.copies[0].format(), limit_gbs(nth), limit_gops(t, nth)));
}

// On a shared machine the best repetition is the one least disturbed by other processes (run
// with --benchmark_repetitions=N): read times from the _min rows and rates from the _max rows.
double min_of(const std::vector<double>& v) {
  return v.empty() ? 0.0 : *std::min_element(v.begin(), v.end());
}
double max_of(const std::vector<double>& v) {
  return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end());
}

void batch_args(benchmark::internal::Benchmark* b) {
  for (int nth : {1, 2})
    for (int m : {1, 2, 3, 4, 6, 8, 32, 512}) b->Args({m, nth});
  b->ArgNames({"m", "threads"})
      ->UseRealTime()
      ->ComputeStatistics("min", min_of)
      ->ComputeStatistics("max", max_of);
}
void head_args(benchmark::internal::Benchmark* b) {
  for (int nth : {1, 2})
    for (int m : {1, 2, 3, 4, 8, 32}) b->Args({m, nth});
  b->ArgNames({"m", "threads"})
      ->UseRealTime()
      ->ComputeStatistics("min", min_of)
      ->ComputeStatistics("max", max_of);
}

// Many rows (prefill, batched decode) over Llama-3.2-1B's FFN shapes.
void prefill_args(benchmark::internal::Benchmark* b) {
  for (int nth : {1, 2})
    for (int m : {8, 32, 128, 512}) b->Args({m, nth});
  b->ArgNames({"m", "threads"})
      ->UseRealTime()
      ->ComputeStatistics("min", min_of)
      ->ComputeStatistics("max", max_of);
}

// Decode (1 row: the weight stream against the memory bandwidth) and batched decode over
// Llama-3.1-8B's FFN shapes, 4096->14336 and 14336->4096, in the types its Q4_K_M file uses.
void large_decode_args(benchmark::internal::Benchmark* b) {
  for (int nth : {1, 2})
    for (int m : {1, 8, 32}) b->Args({m, nth});
  b->ArgNames({"m", "threads"})
      ->UseRealTime()
      ->ComputeStatistics("min", min_of)
      ->ComputeStatistics("max", max_of);
}

#define KILN_MATMUL_BENCH(name, t, n, k, mode, merged, args)                     \
  void name(benchmark::State& s) { run(s, DType::t, n, k, Mode::mode, merged); } \
  BENCHMARK(name)->Apply(args)

KILN_MATMUL_BENCH(BM_q_640x1024_q5_0, Q5_0, 1024, 640, Matmul, false, batch_args);
KILN_MATMUL_BENCH(BM_k_640x256_q5_0, Q5_0, 256, 640, Matmul, false, batch_args);
KILN_MATMUL_BENCH(BM_v_640x256_q8_0, Q8_0, 256, 640, Matmul, false, batch_args);
KILN_MATMUL_BENCH(BM_o_1024x640_q4_k, Q4_K, 640, 1024, Matmul, false, batch_args);
KILN_MATMUL_BENCH(BM_gate_640x2048_q5_0, Q5_0, 2048, 640, Matmul, false, batch_args);
KILN_MATMUL_BENCH(BM_gate_up_640x4096_q5_0, Q5_0, 4096, 640, Matmul, true, batch_args);
KILN_MATMUL_BENCH(BM_down_2048x640_q6_k, Q6_K, 640, 2048, Matmul, false, batch_args);
KILN_MATMUL_BENCH(BM_down_2048x640_q4_k, Q4_K, 640, 2048, Matmul, false, batch_args);
KILN_MATMUL_BENCH(BM_lm_head_640x262144_q8_0, Q8_0, 262144, 640, Matmul, false, head_args);
KILN_MATMUL_BENCH(BM_lm_head_argmax_640x262144_q8_0, Q8_0, 262144, 640, Argmax, false, head_args);
KILN_MATMUL_BENCH(BM_up_2048x8192_q4_k, Q4_K, 8192, 2048, Matmul, false, prefill_args);
KILN_MATMUL_BENCH(BM_up_2048x8192_q6_k, Q6_K, 8192, 2048, Matmul, false, prefill_args);
KILN_MATMUL_BENCH(BM_down_8192x2048_q4_k, Q4_K, 2048, 8192, Matmul, false, prefill_args);
KILN_MATMUL_BENCH(BM_down_8192x2048_q6_k, Q6_K, 2048, 8192, Matmul, false, prefill_args);
KILN_MATMUL_BENCH(BM_up_4096x14336_q4_k, Q4_K, 14336, 4096, Matmul, false, large_decode_args);
KILN_MATMUL_BENCH(BM_down_14336x4096_q4_k, Q4_K, 4096, 14336, Matmul, false, large_decode_args);
KILN_MATMUL_BENCH(BM_down_14336x4096_q6_k, Q6_K, 4096, 14336, Matmul, false, large_decode_args);
KILN_MATMUL_BENCH(BM_q_640x1024_bf16, BF16, 1024, 640, Matmul, false, batch_args);

// Phase 1 of every quantized matmul on its own: one activation row quantized to int8 per 32
// inputs (the cost a norm + quantize fusion could at most move, not remove).
void BM_quantize_row(benchmark::State& state) {
  const int64_t k = state.range(0);
  std::vector<float> x(k);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  for (auto& v : x) v = normal(rng);
  std::vector<int8_t> q(k);
  std::vector<float> d(k / 32), ds(k / 32);
  std::vector<int32_t> s16(k / 16), s32(k / 32);
  auto fn = active_isa() == Isa::Avx512 ? quantize_row_avx512
            : active_isa() == Isa::Avx2 ? quantize_row_avx2
                                        : quantize_row_scalar;
  for (auto _ : state) {
    fn(x.data(), k, 1, q.data(), d.data(), s16.data(), s32.data(), ds.data());
    benchmark::DoNotOptimize(q.data());
    benchmark::ClobberMemory();
  }
  state.SetLabel(isa_name(active_isa()));
}
BENCHMARK(BM_quantize_row)->Arg(640)->Arg(2048);
KILN_MATMUL_BENCH(BM_q_640x1024_f16, F16, 1024, 640, Matmul, false, batch_args);

}  // namespace
}  // namespace kiln::kernels

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext(
      "machine_limits",
      fmt::format("{} GB/s read, {} GOP/s int8 VNNI with 2 threads (half with 1); from "
                  "machine_limits_bench; override with KILN_LIMIT_GBS/KILN_LIMIT_GOPS",
                  kiln::kernels::env_or("KILN_LIMIT_GBS", 26.0),
                  kiln::kernels::env_or("KILN_LIMIT_GOPS", 1120.0)));
  benchmark::AddCustomContext("isa", kiln::isa_name(kiln::active_isa()));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
