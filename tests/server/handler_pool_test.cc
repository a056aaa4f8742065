// The handler pool starts threads on demand up to its bound, runs every queued task, and lets
// threads that stay idle for its timeout exit (joined, so their stacks are given back).
#include "kiln/server/handler_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <functional>
#include <future>
#include <mutex>
#include <thread>
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
  HandlerPool pool(4, 1000ms);
  // One task every 150 ms for 1.5 s: the thread never waits the full second, so every task runs
  // on the same thread (a timer counted from the thread's start, not from its last task, would
  // retire it after 1 s and start another).
  std::mutex mu;
  std::vector<std::thread::id> ran_on;
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(pool.submit([&] {
      std::lock_guard lock(mu);
      ran_on.push_back(std::this_thread::get_id());
    }));
    ASSERT_TRUE(wait_until(
        [&] {
          std::lock_guard lock(mu);
          return ran_on.size() == static_cast<size_t>(i) + 1;
        },
        10s));
    std::this_thread::sleep_for(150ms);
  }
  EXPECT_EQ(pool.threads(), 1u);
  pool.shutdown();
  for (const auto& id : ran_on) EXPECT_EQ(id, ran_on.front());
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
