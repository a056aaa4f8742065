// Synchronization costs a graph replay pays: ns per SpinBarrier crossing and ns per
// ThreadPool::run() of an empty function, with 1 and 2 threads. A decode step of the default
// model crosses a few hundred barriers and does one run(), so "well under a microsecond" per
// barrier keeps synchronization under ~1% of a ~10 ms step.
//
// On a shared machine the best repetition is the least disturbed one: read the _min rows
// (--benchmark_repetitions=N). With more runnable threads than cores, a barrier costs whatever
// the scheduler makes the late thread wait; that is measured too (it is what oversubscription
// costs), but it is not the barrier's own cost.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <vector>

#include "bench_threads.h"
#include "kiln/base/thread_pool.h"

namespace kiln {
namespace {

using bench::pool;

// One run() whose threads all cross `kCrossings` barriers: the time per iteration divided by
// kCrossings is the cost of one barrier (the run()'s own cost is amortized away).
void BM_barrier(benchmark::State& state) {
  const int nth = static_cast<int>(state.range(0));
  constexpr int kCrossings = 1000;
  ThreadPool& p = pool(nth);
  SpinBarrier barrier(nth);
  for (auto _ : state) {
    p.run([&](int, int) {
      for (int i = 0; i < kCrossings; ++i) barrier.arrive_and_wait();
    });
  }
  state.counters["ns/barrier"] = benchmark::Counter(
      static_cast<double>(kCrossings) * 1e-9,
      benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// An empty run(): wake the workers, run nothing, wait for them.
void BM_run_empty(benchmark::State& state) {
  const int nth = static_cast<int>(state.range(0));
  ThreadPool& p = pool(nth);
  for (auto _ : state) p.run([](int, int) {});
  state.counters["ns/run"] = benchmark::Counter(
      1e-9, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

// run() after the workers have gone to sleep (the first step after an idle gap).
void BM_run_after_idle(benchmark::State& state) {
  ThreadPool& p = pool(2);
  for (auto _ : state) {
    state.PauseTiming();
    p.run([](int, int) {});
    struct timespec ts {
      0, 5'000'000
    };  // 5 ms: longer than any spin phase
    nanosleep(&ts, nullptr);
    state.ResumeTiming();
    p.run([](int, int) {});
  }
}

double min_of(const std::vector<double>& v) {
  return v.empty() ? 0.0 : *std::min_element(v.begin(), v.end());
}

BENCHMARK(BM_barrier)->Arg(1)->Arg(2)->UseRealTime()->ComputeStatistics("min", min_of);
BENCHMARK(BM_run_empty)->Arg(1)->Arg(2)->UseRealTime()->ComputeStatistics("min", min_of);
BENCHMARK(BM_run_after_idle)->Iterations(50)->UseRealTime()->ComputeStatistics("min", min_of);

}  // namespace
}  // namespace kiln

BENCHMARK_MAIN();
