// The handler pool starts threads on demand up to its bound, runs every queued task, and lets
// threads that stay idle for its timeout exit (joined, so their stacks are given back).
#include "kiln/server/handler_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <vector>

namespace kiln::server {
namespace {

using namespace std::chrono_literals;

// Threads in this process, from /proc/self/status.
int process_threads() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return -1;
  char line[256];
  int n = -1;
  while (std::fgets(line, sizeof line, f) != nullptr)
    if (std::sscanf(line, "Threads: %d", &n) == 1) break;
  std::fclose(f);
  return n;
}

// Submits `n` tasks that all block until released; returns once all are running.
struct BlockedTasks {
  std::promise<void> release;
  std::shared_future<void> go{release.get_future().share()};
  std::atomic<int> running{0};
  std::atomic<int> done{0};

  void submit(HandlerPool& pool, int n) {
    for (int i = 0; i < n; ++i)
      ASSERT_TRUE(pool.submit([this] {
        ++running;
        go.wait();
        ++done;
      }));
    for (auto start = std::chrono::steady_clock::now(); running < n;) {
      ASSERT_LT(std::chrono::steady_clock::now() - start, 10s) << running << " of " << n;
      std::this_thread::sleep_for(1ms);
    }
  }
};

bool wait_until(const std::function<bool()>& cond, std::chrono::milliseconds limit) {
  for (auto start = std::chrono::steady_clock::now();
       std::chrono::steady_clock::now() - start < limit;) {
    if (cond()) return true;
    std::this_thread::sleep_for(2ms);
  }
  return cond();
}

TEST(HandlerPool, IdleThreadsExitAfterTheTimeoutAndAreStartedAgain) {
  const int before = process_threads();
  HandlerPool pool(16, 100ms);
  BlockedTasks burst;
  burst.submit(pool, 8);
  EXPECT_EQ(pool.threads(), 8u);
  EXPECT_EQ(process_threads(), before + 8);
  burst.release.set_value();
  ASSERT_TRUE(wait_until([&] { return burst.done == 8; }, 10s));
  // Idle now: every thread leaves after 100 ms (each joins those that left before it, and
  // shutdown below joins the last, so nothing is left running).
  ASSERT_TRUE(wait_until([&] { return pool.threads() == 0; }, 10s)) << pool.threads();
  ASSERT_TRUE(wait_until([&] { return process_threads() <= before + 1; }, 10s))
      << process_threads() - before << " threads still running";
  // Work after the pool emptied starts threads again.
  BlockedTasks again;
  again.submit(pool, 3);
  EXPECT_EQ(pool.threads(), 3u);
  again.release.set_value();
  pool.shutdown();
  EXPECT_EQ(again.done, 3);
  EXPECT_EQ(process_threads(), before);
}

TEST(HandlerPool, ThreadsBusierThanTheTimeoutStay) {
  HandlerPool pool(4, 50ms);
  std::atomic<int> ran{0};
  // One task every 10 ms for 300 ms: the thread never waits 50 ms, so it is never replaced.
  for (int i = 0; i < 30; ++i) {
    ASSERT_TRUE(pool.submit([&] { ++ran; }));
    std::this_thread::sleep_for(10ms);
    EXPECT_EQ(pool.threads(), 1u) << "task " << i;
  }
  pool.shutdown();
  EXPECT_EQ(ran, 30);
}

TEST(HandlerPool, BoundedAndQueuedTasksAllRunWithoutATimeout) {
  HandlerPool pool(2, 0ms);  // 0: idle threads are kept
  BlockedTasks both;
  both.submit(pool, 2);
  std::atomic<int> later{0};
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(pool.submit([&] { ++later; }));
  EXPECT_EQ(pool.threads(), 2u);  // the bound: the 5 wait in order
  EXPECT_EQ(later, 0);
  both.release.set_value();
  ASSERT_TRUE(wait_until([&] { return later == 5; }, 10s));
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(pool.threads(), 2u);  // kept
  pool.shutdown();
  EXPECT_FALSE(pool.submit([] {}));
}

}  // namespace
}  // namespace kiln::server
