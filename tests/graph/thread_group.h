// A tensor-parallel group of threads in one process, for testing collectives and whole TP
// runs without MPI: rank r is a thread; each collective is a rendezvous on a shared board
// (every rank posts its bytes, all wait, all read, all wait again before the board is
// reused). A rank that fails calls abort_all(), which makes every other rank's current and
// next collective throw instead of waiting forever, as the MPI watchdog ends real ranks.
#pragma once
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <vector>

#include "kiln/base/communicator.h"
#include "kiln/base/error.h"

namespace kiln::testing {

class ThreadGroup {
 public:
  explicit ThreadGroup(int size) : size_(size), posted_(size) {}
  int size() const { return size_; }

  void abort_all() {
    std::lock_guard<std::mutex> lock(mutex_);
    aborted_ = true;
    cv_.notify_all();
  }

  class Member final : public Communicator {
   public:
    Member(ThreadGroup& group, int rank) : group_(group), rank_(rank) {}
    int rank() const override { return rank_; }
    int size() const override { return group_.size_; }
    void allgather(const void* send, size_t bytes, void* recv) override {
      group_.posted_[rank_].assign(static_cast<const char*>(send),
                                   static_cast<const char*>(send) + bytes);
      group_.sync();
      for (int r = 0; r < group_.size_; ++r) {
        KILN_CHECK(group_.posted_[r].size() == bytes, "rank {} posted {} bytes, rank {} {}", r,
                   group_.posted_[r].size(), rank_, bytes);
        std::memcpy(static_cast<char*>(recv) + r * bytes, group_.posted_[r].data(), bytes);
      }
      group_.sync();
      account(0);
    }
    void broadcast(void* data, size_t bytes, int root) override {
      if (rank_ == root)
        group_.posted_[root].assign(static_cast<char*>(data), static_cast<char*>(data) + bytes);
      group_.sync();
      if (rank_ != root) {
        KILN_CHECK(group_.posted_[root].size() == bytes, "broadcast of {} bytes, {} expected",
                   group_.posted_[root].size(), bytes);
        std::memcpy(data, group_.posted_[root].data(), bytes);
      }
      group_.sync();
      account(0);
    }
    [[noreturn]] void abort(int code) override {
      group_.abort_all();
      fail("rank {} aborted the group ({})", rank_, code);
    }

   private:
    ThreadGroup& group_;
    int rank_;
  };

  std::unique_ptr<Member> member(int rank) { return std::make_unique<Member>(*this, rank); }

 private:
  // A reusable barrier that throws once the group is aborted.
  void sync() {
    std::unique_lock<std::mutex> lock(mutex_);
    KILN_CHECK(!aborted_, "another rank of the group failed");
    const uint64_t generation = generation_;
    if (++arrived_ == size_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return generation_ != generation || aborted_; });
    KILN_CHECK(generation_ != generation, "another rank of the group failed");
  }

  int size_;
  std::vector<std::vector<char>> posted_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool aborted_ = false;
};

}  // namespace kiln::testing
