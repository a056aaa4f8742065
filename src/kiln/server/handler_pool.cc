#include "kiln/server/handler_pool.h"

#include <algorithm>

namespace kiln::server {

HandlerPool::HandlerPool(size_t max_threads, std::chrono::milliseconds idle_timeout)
    : max_threads_(std::max<size_t>(max_threads, 1)), idle_timeout_(idle_timeout) {}

HandlerPool::~HandlerPool() { shutdown(); }

bool HandlerPool::submit(std::function<void()> task) {
  std::unique_lock lock(mu_);
  if (stopping_) return false;
  tasks_.push_back(std::move(task));
  // A queued task is taken by an idle thread; start one only when none is idle.
  if (idle_ < tasks_.size() && threads_.size() < max_threads_) {
    // The new thread reads its entry only after taking mu_, which is held until it is set.
    auto self = threads_.emplace(threads_.end());
    *self = std::thread([this, self] { work(self); });
  } else {
    cv_.notify_one();
  }
  join_exited(lock);
  return true;
}

void HandlerPool::join_exited(std::unique_lock<std::mutex>& lock) {
  if (exited_.empty()) return;
  std::vector<std::thread> joining;
  joining.swap(exited_);
  lock.unlock();
  for (auto& t : joining) t.join();
  lock.lock();
}

void HandlerPool::shutdown() {
  std::vector<std::thread> joining;
  {
    std::unique_lock lock(mu_);
    stopping_ = true;
    for (auto& t : threads_) joining.push_back(std::move(t));
    threads_.clear();
    for (auto& t : exited_) joining.push_back(std::move(t));
    exited_.clear();
  }
  cv_.notify_all();
  for (auto& t : joining) t.join();
}

size_t HandlerPool::threads() const {
  std::lock_guard lock(mu_);
  return threads_.size();
}

void HandlerPool::work(Threads::iterator self) {
  std::unique_lock lock(mu_);
  const auto ready = [&] { return stopping_ || !tasks_.empty(); };
  for (;;) {
    ++idle_;
    bool woken = true;
    if (idle_timeout_.count() > 0) {
      woken = cv_.wait_for(lock, idle_timeout_, ready);
    } else {
      cv_.wait(lock, ready);
    }
    --idle_;
    if (!woken) {
      // Idle for the whole timeout: leave. shutdown() has not run (it would have woken us), so
      // this thread's entry is still in threads_. Its handle waits in exited_ for the next
      // submit(), shutdown() or leaving thread to join; this one joins those that left before
      // it, so at most one finished thread is ever left unjoined (its stack still mapped).
      std::vector<std::thread> earlier;
      earlier.swap(exited_);
      exited_.push_back(std::move(*self));
      threads_.erase(self);
      lock.unlock();
      for (auto& t : earlier) t.join();
      return;
    }
    if (tasks_.empty()) return;  // stopping, nothing left to run
    auto task = std::move(tasks_.front());
    tasks_.pop_front();
    lock.unlock();
    task();
    lock.lock();
  }
}

}  // namespace kiln::server
