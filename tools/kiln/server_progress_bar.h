// A one-line progress bar on stderr for the client tools (eval, bench serving): thread-safe,
// with elapsed time (the loading bar in progress_bar.h is per stage). Redrawn in
// place on a terminal, printed only at the end otherwise (so logs stay readable).
#pragma once
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace kiln::cli {

class ClientProgressBar {
 public:
  ClientProgressBar(std::string label, int64_t total);
  void advance(int64_t n = 1);  // thread-safe
  void finish();

 private:
  void draw(bool force);
  std::mutex mu_;
  std::string label_;
  int64_t total_;
  int64_t done_ = 0;
  bool tty_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace kiln::cli
