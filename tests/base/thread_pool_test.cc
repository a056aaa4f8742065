#include "kiln/base/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace kiln {
namespace {

TEST(ThreadPool, EveryThreadRunsOncePerRun) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(3);
  for (int r = 0; r < 100; ++r) {
    pool.run([&](int tid, int nth) {
      EXPECT_EQ(nth, 3);
      hits[tid].fetch_add(1);
    });
  }
  for (auto& h : hits) EXPECT_EQ(h.load(), 100);
}

TEST(ThreadPool, BarrierOrdersPhases) {
  ThreadPool pool(2);
  std::vector<int> data(2, 0);
  for (int r = 0; r < 200; ++r) {
    pool.run([&](int tid, int nth) {
      data[tid] = r;
      pool.barrier();
      EXPECT_EQ(data[1 - tid], r);  // the other thread's write is visible after the barrier
      pool.barrier();
    });
  }
}

TEST(SplitRange, CoversEverythingOnce) {
  for (int64_t n : {0, 1, 7, 64, 1000}) {
    for (int nth : {1, 2, 3, 5}) {
      int64_t covered = 0, prev_end = 0;
      for (int t = 0; t < nth; ++t) {
        Range r = split_range(n, t, nth, 4);
        EXPECT_EQ(r.begin, prev_end);
        EXPECT_LE(r.begin, r.end);
        covered += r.end - r.begin;
        prev_end = r.end;
      }
      EXPECT_EQ(covered, n);
    }
  }
}

}  // namespace
}  // namespace kiln

namespace kiln {
namespace {

// A kernel throwing on a worker thread surfaces on the caller instead of terminating.
TEST(ThreadPool, WorkerExceptionIsRethrownOnCaller) {
  ThreadPool pool(2);
  EXPECT_THROW(pool.run([](int tid, int) {
    if (tid == 1) throw std::runtime_error("bad input");
  }),
               std::runtime_error);
  int ran = 0;
  pool.run([&](int tid, int) {
    if (tid == 0) ++ran;
  });
  EXPECT_EQ(ran, 1);  // the pool still works
}

}  // namespace
}  // namespace kiln
