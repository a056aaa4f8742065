// Worker groups for the kernel benchmarks: one ThreadPool per thread count, kept across
// benchmarks (starting threads per iteration would be timed), and running a kernel on a group
// as a graph plan's step does.
#pragma once
#include <map>
#include <memory>

#include "kiln/base/thread_pool.h"
#include "kiln/kernels/exec_context.h"

namespace kiln::bench {

inline ThreadPool& pool(int nth) {
  static std::map<int, std::unique_ptr<ThreadPool>> pools;
  std::unique_ptr<ThreadPool>& p = pools[nth];
  if (!p) p = std::make_unique<ThreadPool>(nth);
  return *p;
}

// Runs f(ctx) on an nth-thread group sharing `barrier` (made for nth threads); on the calling
// thread alone for nth = 1.
template <class F>
void on_group(int nth, SpinBarrier& barrier, F&& f) {
  if (nth == 1) {
    f(kernels::ExecContext{});
    return;
  }
  pool(nth).run([&](int tid, int n) { f(kernels::ExecContext{tid, n, &barrier}); });
}

}  // namespace kiln::bench
