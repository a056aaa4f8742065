#include "kiln/base/thread_pool.h"

#include <immintrin.h>
#include <x86intrin.h>

#include <algorithm>
#include <chrono>

#include "kiln/base/error.h"

namespace kiln {
namespace {

// How long a waiting thread spins before it sleeps on a futex (std::atomic::wait). Budgets are
// time, not pause counts: `pause` costs ~10 cycles on some cores and ~140 on others (Skylake
// and later), so a fixed count spun for anywhere between 5 us and 1 ms.
// A barrier inside a replay waits for the slower thread of a level: usually a few us on an idle
// machine, so 50 us of spinning covers it; past that the partner was most likely preempted
// (more runnable threads than cores), and sleeping hands the core back instead of burning it.
constexpr double kBarrierSpinNs = 50'000;
// Workers between run() calls: the host work between decode steps (sampling, scheduling) is
// usually shorter than this, so back-to-back steps never pay a wake-up.
constexpr double kIdleSpinNs = 200'000;

// TSC ticks per ns, measured once (steady_clock can cost a system call in a VM; rdtsc never
// does, and constant_tsc makes it a wall clock).
double tsc_per_ns() {
  static const double per_ns = [] {
    using clock = std::chrono::steady_clock;
    const auto t0 = clock::now();
    const uint64_t c0 = __rdtsc();
    while (clock::now() - t0 < std::chrono::microseconds(200)) _mm_pause();
    const uint64_t c1 = __rdtsc();
    const double ns = std::chrono::duration<double, std::nano>(clock::now() - t0).count();
    return ns > 0 ? std::max(0.1, static_cast<double>(c1 - c0) / ns) : 1.0;
  }();
  return per_ns;
}

// Spins until done() or `ns` have passed; returns done().
template <typename Done>
bool spin_until(Done&& done, double ns) {
  if (done()) return true;
  const uint64_t start = __rdtsc();
  const auto budget = static_cast<uint64_t>(ns * tsc_per_ns());
  for (;;) {
    for (int i = 0; i < 16; ++i) {
      _mm_pause();
      if (done()) return true;
    }
    if (__rdtsc() - start > budget) return done();
  }
}

}  // namespace

void SpinBarrier::arrive_and_wait() {
  if (participants_ <= 1) return;
  uint32_t phase = phase_.load(std::memory_order_acquire);
  if (arrived_.fetch_add(1, std::memory_order_acq_rel) + 1 == participants_) {
    arrived_.store(0, std::memory_order_relaxed);
    // seq_cst store then seq_cst load of sleepers_, against the sleeper's seq_cst increment
    // then re-check of phase_: one of the two sides always sees the other (no lost wake-up).
    phase_.store(phase + 1, std::memory_order_seq_cst);
    if (sleepers_.load(std::memory_order_seq_cst) > 0) phase_.notify_all();
    return;
  }
  if (spin_until([&] { return phase_.load(std::memory_order_acquire) != phase; }, kBarrierSpinNs))
    return;
  sleepers_.fetch_add(1, std::memory_order_seq_cst);
  while (phase_.load(std::memory_order_seq_cst) == phase)
    phase_.wait(phase, std::memory_order_seq_cst);
  sleepers_.fetch_sub(1, std::memory_order_relaxed);
}

ThreadPool::ThreadPool(int n_threads) : n_threads_(n_threads), barrier_(n_threads) {
  KILN_CHECK(n_threads >= 1 && n_threads <= 1024, "thread count {} out of range", n_threads);
  workers_.reserve(n_threads - 1);
  for (int tid = 1; tid < n_threads; ++tid)
    workers_.emplace_back([this, tid] { worker_loop(tid); });
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
  auto all_done = [&] { return pending_.load(std::memory_order_acquire) == 0; };
  if (!spin_until(all_done, kBarrierSpinNs)) {
    main_waiting_.store(true, std::memory_order_seq_cst);
    for (int v; (v = pending_.load(std::memory_order_seq_cst)) != 0;)
      pending_.wait(v, std::memory_order_seq_cst);
    main_waiting_.store(false, std::memory_order_relaxed);
  }
  if (mine) std::rethrow_exception(mine);
  if (failed_.load(std::memory_order_acquire)) std::rethrow_exception(error_);
}

void ThreadPool::worker_loop(int tid) {
  // Generation 0 is the constructor's; reading the counter here instead would race with a
  // run() that starts before this thread does, and miss that run.
  uint32_t seen = 0;
  for (;;) {
    uint32_t now;
    auto started = [&] { return (now = generation_.load(std::memory_order_acquire)) != seen; };
    if (!spin_until(started, kIdleSpinNs)) {
      sleeping_.fetch_add(1, std::memory_order_seq_cst);
      while (!started()) generation_.wait(seen, std::memory_order_seq_cst);
      sleeping_.fetch_sub(1, std::memory_order_seq_cst);
    }
    seen = now;
    if (stop_.load(std::memory_order_acquire)) return;
    try {
      fn_(ctx_, tid, n_threads_);
    } catch (...) {
      // Keep the first worker exception for the caller; a pool thread must never terminate
      // the process because a kernel rejected its input.
      bool expected = false;
      if (failed_.compare_exchange_strong(expected, true, std::memory_order_acq_rel))
        error_ = std::current_exception();
    }
    // seq_cst against run_raw's main_waiting_ store then pending_ re-check (no lost wake-up).
    if (pending_.fetch_sub(1, std::memory_order_seq_cst) == 1 &&
        main_waiting_.load(std::memory_order_seq_cst))
      pending_.notify_one();
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
