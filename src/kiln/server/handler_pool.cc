#include "kiln/server/handler_pool.h"

#include <algorithm>

namespace kiln::server {

HandlerPool::HandlerPool(size_t max_threads) : max_threads_(std::max<size_t>(max_threads, 1)) {}

HandlerPool::~HandlerPool() { shutdown(); }

bool HandlerPool::submit(std::function<void()> task) {
  std::lock_guard lock(mu_);
  if (stopping_) return false;
  tasks_.push_back(std::move(task));
  // A queued task is taken by an idle thread; start one only when none is idle.
  if (idle_ < tasks_.size() && threads_.size() < max_threads_) {
    threads_.emplace_back([this] { work(); });
  } else {
    cv_.notify_one();
  }
  return true;
}

void HandlerPool::shutdown() {
  std::vector<std::thread> joining;
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    joining.swap(threads_);
  }
  cv_.notify_all();
  for (auto& t : joining) t.join();
}

size_t HandlerPool::threads() const {
  std::lock_guard lock(mu_);
  return threads_.size();
}

void HandlerPool::work() {
  std::unique_lock lock(mu_);
  for (;;) {
    ++idle_;
    cv_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
    --idle_;
    if (tasks_.empty()) return;  // stopping, nothing left to run
    auto task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    task();
    lock.lock();
  }
}

}  // namespace kiln::server
