// The threads that run route handlers. A handler may block for a whole generation (a
// non-streaming request waits for its output, a stream writes events as they come), so it runs
// here and never on an I/O thread. Threads are started on demand up to `max_threads` and then
// kept: an idle server, or one holding thousands of idle or slow connections, has only the
// threads its peak of concurrent requests needed. Tasks beyond the bound wait in order.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln::server {

class HandlerPool {
 public:
  explicit HandlerPool(size_t max_threads);
  ~HandlerPool();  // runs what was queued, then joins
  HandlerPool(const HandlerPool&) = delete;
  HandlerPool& operator=(const HandlerPool&) = delete;

  // Queues `task`; false once shutdown() began (the task is dropped).
  bool submit(std::function<void()> task);
  // Lets the queued tasks run, then joins every thread. Idempotent.
  void shutdown();
  size_t threads() const;

 private:
  void work();

  const size_t max_threads_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  std::vector<std::thread> threads_;
  size_t idle_ = 0;
  bool stopping_ = false;
};

}  // namespace kiln::server
