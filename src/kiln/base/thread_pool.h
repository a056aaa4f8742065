// Persistent worker threads. run(f) calls f(tid, nth) on every thread (the caller is tid 0)
// and returns when all are done; nothing is allocated and no thread is created per call.
// Waiting workers spin briefly, then sleep on a futex (std::atomic::wait), so an idle server
// burns no CPU while a busy decode loop never pays a wake-up syscall.
#pragma once
#include <atomic>
#include <cstdint>
#include <exception>
#include <thread>
#include <vector>

namespace kiln {

// A reusable barrier for a fixed number of participants (all threads of a run, or one worker
// group of a plan level). Spin-then-yield: on an oversubscribed machine it degrades gracefully.
class SpinBarrier {
 public:
  explicit SpinBarrier(int participants = 1) : participants_(participants) {}
  void reset(int participants) { participants_ = participants; }
  void arrive_and_wait();

 private:
  alignas(64) std::atomic<int> arrived_{0};
  alignas(64) std::atomic<uint32_t> phase_{0};
  int participants_;
};

class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  template <typename F>
  void run(F&& f) {
    run_raw(
        [](void* ctx, int tid, int nth) { (*static_cast<std::remove_reference_t<F>*>(ctx))(tid, nth); },
        static_cast<void*>(&f));
  }
  using RawFn = void (*)(void* ctx, int tid, int nth);
  // An exception thrown by f on any thread is rethrown here, on the caller, once every thread
  // has returned (the first one wins). f must not throw on some threads while others wait in
  // a barrier: kernels validate on the host before they split work.
  void run_raw(RawFn fn, void* ctx);

  // Barrier across all threads of the current run().
  void barrier() { barrier_.arrive_and_wait(); }

  // Number of run() calls so far (for tests and overhead accounting).
  uint64_t runs() const { return generation_.load(std::memory_order_relaxed); }

 private:
  void worker_loop(int tid);

  int n_threads_;
  std::vector<std::thread> workers_;
  RawFn fn_ = nullptr;
  void* ctx_ = nullptr;
  alignas(64) std::atomic<uint32_t> generation_{0};
  alignas(64) std::atomic<int> pending_{0};
  alignas(64) std::atomic<int> sleeping_{0};
  std::atomic<bool> stop_{false};
  std::atomic<bool> failed_{false};
  std::exception_ptr error_;
  SpinBarrier barrier_;
};

// Splits [0, n) into nth nearly equal contiguous ranges, each a multiple of `align` items
// except the last; returns thread tid's range.
struct Range {
  int64_t begin;
  int64_t end;
};
Range split_range(int64_t n, int tid, int nth, int64_t align = 1);

}  // namespace kiln
