// The threads that run route handlers. A handler may block for a whole generation (a
// non-streaming request waits for its output, a stream writes events as they come), so it runs
// here and never on an I/O thread. Threads are started on demand up to `max_threads`, and a
// thread left idle for `idle_timeout` exits: an idle server, or one holding thousands of idle or
// slow connections, has only the threads its recent concurrent requests needed, and a burst that
// once needed a hundred threads does not keep their stacks for the life of the process. Tasks
// beyond the bound wait in order.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <list>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::server {

class HandlerPool {
 public:
  // Idle handler threads exit after this long (started again when needed).
  static constexpr std::chrono::milliseconds kDefaultIdleTimeout{30'000};

  // idle_timeout 0: idle threads are kept.
  explicit HandlerPool(size_t max_threads,
                       std::chrono::milliseconds idle_timeout = kDefaultIdleTimeout);
  ~HandlerPool();  // runs what was queued, then joins
  HandlerPool(const HandlerPool&) = delete;
  HandlerPool& operator=(const HandlerPool&) = delete;

  // Queues `task`; false once shutdown() began (the task is dropped).
  bool submit(std::function<void()> task);
  // Lets the queued tasks run, then joins every thread. Idempotent.
  void shutdown();
  // Threads running or waiting for a task (not those that timed out).
  size_t threads() const;

 private:
  using Threads = std::list<std::thread>;
  void work(Threads::iterator self);
  // Joins the threads that timed out (they have left, or are leaving, work()).
  void join_exited(std::unique_lock<std::mutex>& lock);

  const size_t max_threads_;
  const std::chrono::milliseconds idle_timeout_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  Threads threads_;                  // a thread finds its own entry by iterator
  std::vector<std::thread> exited_;  // timed out, not yet joined
  size_t idle_ = 0;
  bool stopping_ = false;
};

}  // namespace kiln::server
