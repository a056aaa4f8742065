// Whole forward steps of the default model (Gemma 3 270M Q4_K_M) through the engine's executor,
// the way the scheduler runs them: decode batches of 1, 8 and 32 sequences (graph mode: one
// plan replay each) and a 512-token prefill (eager: the interpreter).
//
// Counters: tok/s (decode: sequences per step / step time; prefill: prompt tokens / time),
// weight GB/s (matmul weight bytes per step / step time, the batch-1 limit is the machine's
// read bandwidth) and GOP/s (2 * tokens * matmul weights' elements per step, the large-batch
// limit is the int8 VNNI peak). On a shared machine read the _min time rows
// (--benchmark_repetitions=N).
//
// Env: KILN_BENCH_THREADS (default 2), KILN_BENCH_CONTEXT (tokens already in each decode
// sequence's cache, default 64), KILN_DEFAULT_MODEL (model file), KILN_BENCH_GRAPH_MODE
// (optimize | replay | off).
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <vector>

#include "kiln/base/error.h"
#include "kiln/base/log.h"
#include "kiln/engine/kv_pool.h"
#include "kiln/engine/runtime.h"
#include "kiln/engine/step_batch.h"

namespace kiln::engine {
namespace {

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

Runtime& runtime() {
  static std::unique_ptr<Runtime> rt = [] {
    set_log_level("warn");
    RuntimeOptions o;
    o.threads = env_int("KILN_BENCH_THREADS", 2);
    const char* mode = std::getenv("KILN_BENCH_GRAPH_MODE");
    o.graph_mode = parse_graph_mode(mode != nullptr ? mode : "optimize");
    o.max_graph_bs = 32;
    return std::make_unique<Runtime>(o);
  }();
  return *rt;
}

// One sequence with `len` tokens in the cache after this step, whose last `rows` tokens are
// computed now (decode: rows = 1).
void add_sequence(KvPool& pool, StepBatch& b, int len, int rows, int32_t first_token) {
  StepSequence s;
  const int ps = pool.page_size();
  bool ok = pool.alloc((len + ps - 1) / ps, s.pages);
  if (!ok) throw Error("decode_step_bench: KV pool too small");
  s.seq_len = len;
  const int32_t seq = static_cast<int32_t>(b.seqs.size());
  for (int p = len - rows; p < len; ++p) {
    b.token_ids.push_back(first_token + p % 1000);
    b.positions.push_back(p);
    b.token_seq.push_back(seq);
    b.slots.push_back(s.pages[p / ps] * ps + p % ps);
  }
  b.seqs.push_back(std::move(s));
}

void report(benchmark::State& state, int64_t tokens) {
  const ModelInfo& info = runtime().info();
  // Matmul weights are ~1 byte per element or less; count elements via bytes only for GB/s,
  // and GOP/s from the parameter count of the layers the matmuls read (n_params includes the
  // tied embedding, which is the LM head).
  const double bytes = static_cast<double>(info.weight_bytes);
  const double ops = 2.0 * static_cast<double>(tokens) * static_cast<double>(info.n_params);
  using C = benchmark::Counter;
  state.counters["tok/s"] = C(static_cast<double>(tokens), C::kIsIterationInvariantRate);
  state.counters["weight_GB/s"] = C(bytes / 1e9, C::kIsIterationInvariantRate);
  state.counters["GOP/s"] = C(ops / 1e9, C::kIsIterationInvariantRate);
  state.SetLabel(fmt::format("{} threads, {:.0f} MB weights/step", runtime().thread_pool()->size(),
                             bytes / 1e6));
}

void BM_decode_step(benchmark::State& state) {
  Runtime& rt = runtime();
  const int bs = static_cast<int>(state.range(0));
  const int context = env_int("KILN_BENCH_CONTEXT", 64);
  StepBatch b;
  b.greedy_only = true;
  for (int i = 0; i < bs; ++i) add_sequence(rt.kv_pool(), b, context + 1 + i, 1, 100 + 37 * i);
  StepOutput out;
  rt.executor().forward(b, out);  // warm-up
  for (auto _ : state) {
    rt.executor().forward(b, out);
    benchmark::DoNotOptimize(out.greedy_ids.data());
  }
  state.counters["graph"] = out.used_graph ? 1 : 0;
  for (const auto& s : b.seqs) rt.kv_pool().free(s.pages);
  report(state, bs);
}

void BM_prefill(benchmark::State& state) {
  Runtime& rt = runtime();
  const int n = static_cast<int>(state.range(0));
  StepBatch b;
  b.greedy_only = true;
  add_sequence(rt.kv_pool(), b, n, n, 100);
  StepOutput out;
  for (auto _ : state) {
    rt.executor().forward(b, out);
    benchmark::DoNotOptimize(out.greedy_ids.data());
  }
  rt.kv_pool().free(b.seqs[0].pages);
  report(state, n);
}

double min_of(const std::vector<double>& v) {
  return v.empty() ? 0.0 : *std::min_element(v.begin(), v.end());
}
double max_of(const std::vector<double>& v) {
  return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end());
}

BENCHMARK(BM_decode_step)
    ->ArgName("bs")
    ->Arg(1)
    ->Arg(8)
    ->Arg(32)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->ComputeStatistics("min", min_of)
    ->ComputeStatistics("max", max_of);
BENCHMARK(BM_prefill)
    ->ArgName("tokens")
    ->Arg(512)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond)
    ->ComputeStatistics("min", min_of)
    ->ComputeStatistics("max", max_of);

}  // namespace
}  // namespace kiln::engine

BENCHMARK_MAIN();
