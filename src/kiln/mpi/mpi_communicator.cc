#include "kiln/mpi/mpi_communicator.h"

#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <mutex>
#include <string>
#include <thread>

#include "kiln/base/error.h"

namespace kiln {
namespace {

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, text, &len);
  return std::string(text, static_cast<size_t>(len));
}

// Ends the process when an armed collective runs past its deadline. One thread per process,
// asleep on a condition variable while nothing is armed.
class Watchdog {
 public:
  Watchdog(int rank, double timeout_s) : rank_(rank), timeout_(timeout_s) {
    thread_ = std::thread([this] { loop(); });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void arm(const char* what) {
    std::lock_guard<std::mutex> lock(mutex_);
    what_ = what;
    deadline_ = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::chrono::duration<double>(timeout_));
    armed_ = true;
    cv_.notify_all();
  }
  void disarm() {
    std::lock_guard<std::mutex> lock(mutex_);
    armed_ = false;
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
      if (!armed_) {
        cv_.wait(lock);
        continue;
      }
      if (cv_.wait_until(lock, deadline_) == std::cv_status::timeout && armed_ &&
          std::chrono::steady_clock::now() >= deadline_) {
        std::fprintf(stderr,
                     "kiln: error: rank %d: %s did not complete within %.0f s; another rank has "
                     "died or stopped responding (--tp-timeout)\n",
                     rank_, what_, timeout_);
        std::fflush(stderr);
        // Not MPI_Abort: the main thread is inside MPI and the library is only serialized.
        // mpirun sees the exit status and stops the other ranks.
        std::_Exit(3);
      }
    }
  }

  int rank_;
  double timeout_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::thread thread_;
  bool armed_ = false;
  bool stop_ = false;
  const char* what_ = "";
  std::chrono::steady_clock::time_point deadline_;
};

}  // namespace

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(int rank, int size, double timeout_s)
      : rank_(rank), size_(size), watchdog_(rank, timeout_s) {}
  ~MpiCommunicator() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  [[noreturn]] void abort(int code) override {
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }

  void allgather(const void* send, size_t bytes, void* recv) override {
    const auto start = std::chrono::steady_clock::now();
    watchdog_.arm("allgather");
    check(MPI_Allgather(send, count(bytes), MPI_BYTE, recv, count(bytes), MPI_BYTE, MPI_COMM_WORLD),
          "allgather");
    watchdog_.disarm();
    account(elapsed_ns(start));
  }

  void broadcast(void* data, size_t bytes, int root) override {
    const auto start = std::chrono::steady_clock::now();
    watchdog_.arm("broadcast");
    check(MPI_Bcast(data, count(bytes), MPI_BYTE, root, MPI_COMM_WORLD), "broadcast");
    watchdog_.disarm();
    account(elapsed_ns(start));
  }

  // A broadcast that may wait for as long as the root is idle: polled with sleeps so the
  // follower gives its core back (OpenMPI's blocking calls spin).
  void broadcast_idle(void* data, size_t bytes, int root) override {
    MPI_Request request;
    check(MPI_Ibcast(data, count(bytes), MPI_BYTE, root, MPI_COMM_WORLD, &request), "broadcast");
    int done = 0;
    // Spin briefly (a busy server's next step comes at once), then sleep ever longer, up to
    // 2 ms, so an idle follower leaves its core to the others.
    const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(200);
    auto pause = std::chrono::microseconds(20);
    while (true) {
      check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), "broadcast");
      if (done) break;
      if (std::chrono::steady_clock::now() < spin_until) continue;
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::microseconds(2000));
    }
  }

 private:
  static int count(size_t bytes) {
    KILN_CHECK(bytes <= static_cast<size_t>(std::numeric_limits<int>::max()),
               "collective of {} bytes is too large for one MPI call", bytes);
    return static_cast<int>(bytes);
  }
  static int64_t elapsed_ns(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                                start)
        .count();
  }
  void check(int code, const char* what) {
    if (code == MPI_SUCCESS) return;
    watchdog_.disarm();
    fail("rank {}: MPI {} failed: {}", rank_, what, mpi_error_text(code));
  }

  int rank_;
  int size_;
  Watchdog watchdog_;
};

std::unique_ptr<Communicator> make_mpi_communicator(int* argc, char*** argv, double timeout_s) {
  int provided = 0;
  const int code = MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
  KILN_CHECK(code == MPI_SUCCESS, "MPI_Init_thread failed: {}", mpi_error_text(code));
  KILN_CHECK(provided >= MPI_THREAD_SERIALIZED,
             "the MPI library gives thread level {}, kiln needs MPI_THREAD_SERIALIZED", provided);
  // Errors come back as codes (thrown as kiln::Error) instead of aborting without a word.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0;
  int size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return std::make_unique<MpiCommunicator>(rank, size, timeout_s);
}

}  // namespace kiln
