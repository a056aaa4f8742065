#include "kiln/base/thread_pool.h"

#include <immintrin.h>

#include "kiln/base/error.h"

namespace kiln {
namespace {

// About 50-250 us of spinning (a `pause` costs 40-140 cycles) before a waiter yields or
// sleeps: longer than the gap between a decode step's kernels, short enough that a thread
// spinning on an oversubscribed machine (tests running side by side) hands its core over
// quickly to the thread it is waiting for.
constexpr int kSpinIterations = 1 << 11;

}  // namespace

void SpinBarrier::arrive_and_wait() {
  if (participants_ <= 1) return;
  uint32_t phase = phase_.load(std::memory_order_acquire);
  if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == participants_) {
    arrived_.store(0, std::memory_order_relaxed);
    phase_.store(phase + 1, std::memory_order_release);
    return;
  }
  int spins = 0;
  while (phase_.load(std::memory_order_acquire) == phase) {
    if (++spins < kSpinIterations) {
      _mm_pause();
    } else {
      std::this_thread::yield();
    }
  }
}

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads), barrier_(n_threads) {
  KILN_CHECK(n_threads >= 1 && n_threads <= 1024, "thread count {} out of range", n_threads);
  workers_.reserve(n_threads - 1);
  for (int tid = 1; tid < n_threads; ++tid) workers_.emplace_back([this, tid] { worker_loop(tid); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::run_raw(RawFn fn, void* ctx) {
  if (n_threads_ == 1) {
    fn(ctx, 0, 1);
    return;
  }
  failed_.store(false, std::memory_order_relaxed);
  error_ = nullptr;
  fn_ = fn;
  ctx_ = ctx;
  pending_.store(n_threads_ - 1, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_seq_cst);
  if (sleeping_.load(std::memory_order_seq_cst) > 0) generation_.notify_all();
  std::exception_ptr mine;
  try {
    fn(ctx, 0, n_threads_);
  } catch (...) {
    mine = std::current_exception();
  }
  int spins = 0;
  while (pending_.load(std::memory_order_acquire) != 0) {
    if (++spins < kSpinIterations) {
      _mm_pause();
    } else {
      std::this_thread::yield();
    }
  }
  if (mine) std::rethrow_exception(mine);
  if (failed_.load(std::memory_order_acquire)) std::rethrow_exception(error_);
}

void ThreadPool::worker_loop(int tid) {
  // Generation 0 is the constructor's; reading the counter here instead would race with a
  // run() that starts before this thread does, and miss that run.
  uint32_t seen = 0;
  for (;;) {
    int spins = 0;
    uint32_t now;
    while ((now = generation_.load(std::memory_order_acquire)) == seen) {
      if (++spins < kSpinIterations) {
        _mm_pause();
        continue;
      }
      sleeping_.fetch_add(1, std::memory_order_seq_cst);
      generation_.wait(seen, std::memory_order_seq_cst);
      sleeping_.fetch_sub(1, std::memory_order_seq_cst);
      spins = 0;
    }
    seen = now;
    if (stop_.load(std::memory_order_acquire)) return;
    try {
      fn_(ctx_, tid, n_threads_);
    } catch (...) {
      // Keep the first worker exception for the caller; a pool thread must never terminate
      // the process because a kernel rejected its input.
      bool expected = false;
      if (failed_.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) error_ = std::current_exception();
    }
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

Range split_range(int64_t n, int tid, int nth, int64_t align) {
  int64_t units = (n + align - 1) / align;
  int64_t per = units / nth;
  int64_t extra = units % nth;
  int64_t begin_unit = tid * per + (tid < extra ? tid : extra);
  int64_t end_unit = begin_unit + per + (tid < extra ? 1 : 0);
  int64_t begin = begin_unit * align;
  int64_t end = end_unit * align;
  if (begin > n) begin = n;
  if (end > n) end = n;
  return {begin, end};
}

}  // namespace kiln
