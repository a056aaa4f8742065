// The sentence encoder's kernels at all-MiniLM-L6-v2's shapes (hidden 384, FFN 1536, 12 heads
// of 32): each linear layer's GEMM over 512 packed rows in bf16 (gemm_bf16.h) against the f32
// matmul the exact precision uses (a PackedWeight of f32 rows), and one head's attention at
// sentence lengths. Counters: MAC/s of the arithmetic done. Run the two precisions interleaved
// on this noisy host, e.g.
//   build/release/bench/encoder_bench --benchmark_repetitions=5
//       --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "bench_threads.h"
#include "kiln/base/tensor.h"
#include "kiln/base/thread_pool.h"
#include "kiln/kernels/encoder_attention.h"
#include "kiln/kernels/gemm_bf16.h"
#include "kiln/kernels/matmul.h"

namespace kiln::kernels {
namespace {

using bench::on_group;

std::vector<float> random_vec(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d;
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

void set_macs(benchmark::State& state, double macs) {
  state.counters["MAC_per_second"] =
      benchmark::Counter(macs, benchmark::Counter::kIsIterationInvariantRate);
}

// Args: n, k, threads, bf16 (1) or f32 (0); m = 512 rows.
void BM_EncoderLinear(benchmark::State& state) {
  const int64_t m = 512, n = state.range(0), k = state.range(1);
  const int nth = static_cast<int>(state.range(2));
  const bool bf16 = state.range(3) != 0;
  auto w = random_vec(n * k, 1), x = random_vec(m * k, 2), bias = random_vec(n, 3);
  std::vector<float> y(m * n);
  const Bf16Weight wb = Bf16Weight::pack(w.data(), n, k);
  const PackedWeight wf = PackedWeight::pack(Tensor::borrow(DType::F32, Shape{n, k}, w.data()));
  std::vector<uint8_t> scratch(
      std::max(gemm_bf16_scratch_bytes(wb, m), matmul_scratch_bytes(wf, m)) + 64);
  SpinBarrier barrier(nth);
  for (auto _ : state) {
    on_group(nth, barrier, [&](const ExecContext& ctx) {
      if (bf16)
        gemm_bf16(wb, x.data(), m, y.data(), bias.data(), nullptr, scratch.data(), ctx);
      else
        matmul(wf, x.data(), m, y.data(), nullptr, scratch.data(), ctx);
    });
    benchmark::DoNotOptimize(y.data());
  }
  set_macs(state, static_cast<double>(m) * n * k);
}

// Args: sequence length. One head of 32 inside a fused QKV row of 3 x 384.
void BM_EncoderAttention(benchmark::State& state) {
  const int64_t len = state.range(0), hd = 32, stride = 3 * 384;
  auto qkv = random_vec(len * stride, 4);
  std::vector<float> out(len * 384), ws(encoder_attention_workspace_floats(len, hd));
  for (auto _ : state) {
    encoder_attention(qkv.data(), qkv.data() + 384, qkv.data() + 768, stride, len, hd, 0.17f,
                      out.data(), 384, ws.data());
    benchmark::DoNotOptimize(out.data());
  }
  set_macs(state, 2.0 * len * len * hd);
}

BENCHMARK(BM_EncoderLinear)
    ->ArgsProduct({{1152, 384, 1536}, {384}, {1, 2}, {1, 0}})
    ->Args({384, 1536, 1, 1})
    ->Args({384, 1536, 1, 0})
    ->Args({384, 1536, 2, 1})
    ->Args({384, 1536, 2, 0})
    ->ArgNames({"n", "k", "threads", "bf16"})
    ->UseRealTime();
BENCHMARK(BM_EncoderAttention)->Arg(16)->Arg(44)->Arg(100)->Arg(256)->ArgName("len");

}  // namespace
}  // namespace kiln::kernels

BENCHMARK_MAIN();
