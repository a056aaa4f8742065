// Microbenchmarks of the non-GEMM kernels at Gemma 3 270M shapes (n_embd 640, n_ff 2048,
// 4 heads x 256, 1 KV head), with 1 and 2 threads. The bytes_per_second counter counts the
// bytes a kernel must move (inputs read + outputs written; for attention the f16 K and V it
// reads), to compare with the machine's ~26 GB/s read bandwidth.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "bench_threads.h"
#include "kiln/base/half.h"
#include "kiln/base/thread_pool.h"
#include "kiln/base/zeroed_pages.h"
#include "kiln/kernels/attention.h"
#include "kiln/kernels/elementwise.h"
#include "kiln/kernels/norm.h"
#include "kiln/kernels/rope.h"

namespace kiln::kernels {
namespace {

using bench::on_group;

std::vector<float> random_vec(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

void set_bytes(benchmark::State& state, double bytes) {
  state.counters["bytes_per_second"] = benchmark::Counter(
      bytes, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::OneK::kIs1024);
}

void BM_RmsNorm(benchmark::State& state) {
  const int64_t rows = state.range(0), cols = 640;
  const int nth = static_cast<int>(state.range(1));
  auto x = random_vec(rows * cols, 1), w = random_vec(cols, 2);
  std::vector<float> out(x.size());
  SpinBarrier barrier(nth);
  for (auto _ : state) {
    on_group(nth, barrier, [&](const ExecContext& ctx) {
      rms_norm(x.data(), w.data(), out.data(), rows, cols, 1e-6f, ctx);
    });
    benchmark::DoNotOptimize(out.data());
  }
  set_bytes(state, 2.0 * rows * cols * 4);
}

void BM_AddRmsNorm(benchmark::State& state) {
  const int64_t rows = state.range(0), cols = 640;
  const int nth = static_cast<int>(state.range(1));
  auto a = random_vec(rows * cols, 1), b = random_vec(rows * cols, 2), w = random_vec(cols, 3);
  std::vector<float> sum(a.size()), out(a.size());
  SpinBarrier barrier(nth);
  for (auto _ : state) {
    on_group(nth, barrier, [&](const ExecContext& ctx) {
      add_rms_norm(a.data(), b.data(), w.data(), sum.data(), out.data(), rows, cols, 1e-6f, ctx);
    });
    benchmark::DoNotOptimize(out.data());
  }
  set_bytes(state, 4.0 * rows * cols * 4);
}

void BM_GeluMul(benchmark::State& state) {
  const int64_t n = state.range(0) * 2048;
  const int nth = static_cast<int>(state.range(1));
  auto g = random_vec(n, 1), u = random_vec(n, 2);
  std::vector<float> out(n);
  SpinBarrier barrier(nth);
  for (auto _ : state) {
    on_group(nth, barrier,
             [&](const ExecContext& ctx) { gelu_mul(g.data(), u.data(), out.data(), n, ctx); });
    benchmark::DoNotOptimize(out.data());
  }
  set_bytes(state, 3.0 * n * 4);
}

void BM_Rope(benchmark::State& state) {
  const int64_t rows = state.range(0);
  const int nth = static_cast<int>(state.range(1));
  const int heads = 4, hd = 256;
  auto inv = rope_inv_freq(hd, 1e6);
  auto x = random_vec(rows * heads * hd, 1);
  std::vector<int32_t> pos(rows);
  for (int64_t r = 0; r < rows; ++r) pos[r] = static_cast<int32_t>(1000 + r);
  SpinBarrier barrier(nth);
  for (auto _ : state) {
    on_group(nth, barrier, [&](const ExecContext& ctx) {
      rope(x.data(), pos.data(), inv.data(), x.data(), rows, heads, hd, true, ctx);
    });
    benchmark::DoNotOptimize(x.data());
  }
  set_bytes(state, 2.0 * rows * heads * hd * 4);
}

// B sequences of `keys` keys each, the last `rows` of each being this step's query rows
// (rows = 1: decode; rows = keys: prefill); plan + run per step. Gemma 3 270M attention shapes.
// cold: each step reads another layer's K and V, from enough layers' pools (>= 128 MiB in all,
// four times the L3) that they come from memory, as in a model's decode step, where a layer's
// KV was last read a whole step (all the weights) ago. The pools live in huge pages, as the
// engine's KV pool does (ZeroedPages): with 4 KiB pages the cold runs would time TLB walks the
// engine never makes.
// softcap > 0: Gemma 2's attention-logit cap (the cost of the tanh pass over the scores).
void run_attention_bench(benchmark::State& state, int B, int keys, int rows, int nth,
                         bool cold = false, float softcap = 0.0f) {
  const int H = 4, KH = 1, hd = 256, page_size = 16;
  const int pages_per_seq = (keys + page_size - 1) / page_size;
  const int64_t n_pages = static_cast<int64_t>(B) * pages_per_seq;
  const size_t layer_elems = static_cast<size_t>(n_pages) * page_size * KH * hd;
  const size_t layer_bytes = 2 * layer_elems * sizeof(uint16_t);
  const size_t layers = cold ? ((size_t{128} << 20) + layer_bytes - 1) / layer_bytes : 1;
  ZeroedPages kmem(layers * layer_elems * sizeof(uint16_t)), vmem(kmem.bytes());
  auto* kpool = static_cast<uint16_t*>(kmem.data());
  auto* vpool = static_cast<uint16_t*>(vmem.data());
  {
    auto f = random_vec(layer_elems, 9);
    for (size_t l = 0; l < layers; ++l)
      for (size_t i = 0; i < f.size(); ++i)
        kpool[l * layer_elems + i] = vpool[l * layer_elems + i] = f32_to_f16(f[i]);
  }
  // Pages interleaved across sequences, as a long-running server's pool would be.
  std::vector<int32_t> bt(static_cast<size_t>(B) * pages_per_seq);
  for (int s = 0; s < B; ++s)
    for (int p = 0; p < pages_per_seq; ++p) bt[s * pages_per_seq + p] = p * B + s;
  const int T = B * rows;
  std::vector<int32_t> lens(B, keys), pos(T), seq(T);
  for (int s = 0; s < B; ++s)
    for (int r = 0; r < rows; ++r) {
      pos[s * rows + r] = keys - rows + r;
      seq[s * rows + r] = s;
    }
  auto q = random_vec(static_cast<size_t>(T) * H * hd, 3);
  std::vector<float> out(q.size());

  AttentionParams p;
  p.n_heads = H;
  p.n_kv_heads = KH;
  p.head_dim = hd;
  p.max_pages_per_seq = pages_per_seq;
  p.scale = 1.0f / 16.0f;
  p.softcap = softcap;
  AttentionLimits lim;
  lim.max_tokens = T;
  lim.max_threads = nth;
  AttentionWork work(p, lim);
  std::vector<float> scratch(attention_scratch_bytes(p, lim) / sizeof(float));
  AttentionInputs in;
  in.q = q.data();
  in.T = T;
  in.positions = pos.data();
  in.token_seq = seq.data();
  in.block_table = bt.data();
  in.seq_lens = lens.data();
  in.S = B;
  in.out = out.data();
  SpinBarrier barrier(nth);
  size_t layer = 0;
  for (auto _ : state) {
    in.kv = {kpool + layer * layer_elems, vpool + layer * layer_elems, n_pages, page_size, KH, hd};
    layer = (layer + 1) % layers;
    attention_plan(p, in, nth, &work);
    on_group(nth, barrier,
             [&](const ExecContext& ctx) { attention_run(p, in, work, scratch.data(), ctx); });
    benchmark::DoNotOptimize(out.data());
  }
  set_bytes(state, 2.0 * B * keys * KH * hd * 2);
}

// Decode: B sequences of `keys` keys each, one query row per sequence.
void BM_AttentionDecode(benchmark::State& state) {
  run_attention_bench(state, static_cast<int>(state.range(0)), static_cast<int>(state.range(1)), 1,
                      static_cast<int>(state.range(2)));
}

void BM_AttentionDecodeCold(benchmark::State& state) {
  run_attention_bench(state, static_cast<int>(state.range(0)), static_cast<int>(state.range(1)), 1,
                      static_cast<int>(state.range(2)), true);
}

// Prefill: B sequences of `rows` new rows each (causal over their own keys). Mostly FLOPs: the
// bytes counter still counts each sequence's K and V once.
void BM_AttentionPrefill(benchmark::State& state) {
  const int rows = static_cast<int>(state.range(1));
  run_attention_bench(state, static_cast<int>(state.range(0)), rows, rows,
                      static_cast<int>(state.range(2)));
}

void BM_AttentionDecodeSoftcap(benchmark::State& state) {
  run_attention_bench(state, static_cast<int>(state.range(0)), static_cast<int>(state.range(1)), 1,
                      static_cast<int>(state.range(2)), false, 50.0f);
}

void BM_AttentionPrefillSoftcap(benchmark::State& state) {
  const int rows = static_cast<int>(state.range(1));
  run_attention_bench(state, static_cast<int>(state.range(0)), rows, rows,
                      static_cast<int>(state.range(2)), false, 50.0f);
}

void RowsAndThreads(benchmark::internal::Benchmark* b) {
  for (int nth : {1, 2})
    for (int rows : {1, 32, 512}) b->Args({rows, nth});
}

BENCHMARK(BM_RmsNorm)->Apply(RowsAndThreads)->UseRealTime();
BENCHMARK(BM_AddRmsNorm)->Apply(RowsAndThreads)->UseRealTime();
BENCHMARK(BM_GeluMul)->Apply(RowsAndThreads)->UseRealTime();
BENCHMARK(BM_Rope)->Apply(RowsAndThreads)->UseRealTime();
BENCHMARK(BM_AttentionDecode)
    ->ArgsProduct({{1, 8, 32}, {160, 512, 4096}, {1, 2}})
    ->ArgNames({"B", "keys", "threads"})
    ->UseRealTime();
BENCHMARK(BM_AttentionDecodeCold)
    ->ArgsProduct({{8, 32}, {160, 512, 1024}, {1, 2}})
    ->ArgNames({"B", "keys", "threads"})
    ->UseRealTime();
BENCHMARK(BM_AttentionPrefill)
    ->ArgsProduct({{1, 4}, {128, 512}, {1, 2}})
    ->ArgNames({"B", "rows", "threads"})
    ->UseRealTime();
BENCHMARK(BM_AttentionDecodeSoftcap)
    ->ArgsProduct({{1, 8, 32}, {160, 512, 4096}, {1, 2}})
    ->ArgNames({"B", "keys", "threads"})
    ->UseRealTime();
BENCHMARK(BM_AttentionPrefillSoftcap)
    ->ArgsProduct({{1, 4}, {128, 512}, {1, 2}})
    ->ArgNames({"B", "rows", "threads"})
    ->UseRealTime();

}  // namespace
}  // namespace kiln::kernels

BENCHMARK_MAIN();
