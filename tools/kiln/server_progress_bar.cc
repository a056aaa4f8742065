#include "server_progress_bar.h"

#include <unistd.h>

#include <cstdio>

namespace kiln::cli {

ClientProgressBar::ClientProgressBar(std::string label, int64_t total)
    : label_(std::move(label)),
      total_(total),
      tty_(isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {
  draw(true);
}

void ClientProgressBar::advance(int64_t n) {
  std::lock_guard lock(mu_);
  done_ += n;
  draw(false);
}

void ClientProgressBar::finish() {
  std::lock_guard lock(mu_);
  if (finished_) return;
  finished_ = true;
  draw(true);
  std::fputc('\n', stderr);
}

void ClientProgressBar::draw(bool force) {
  auto now = std::chrono::steady_clock::now();
  if (!tty_ && !(force && finished_)) return;
  if (!force && now - last_draw_ < std::chrono::milliseconds(100) && done_ < total_) return;
  last_draw_ = now;
  constexpr int kWidth = 30;
  double frac = total_ > 0 ? static_cast<double>(done_) / static_cast<double>(total_) : 1.0;
  int filled = static_cast<int>(frac * kWidth);
  double secs = std::chrono::duration<double>(now - start_).count();
  std::string bar(filled, '#');
  bar.resize(kWidth, '.');
  std::fprintf(stderr, "%s%s [%s] %lld/%lld %.1fs", tty_ ? "\r" : "", label_.c_str(), bar.c_str(),
               static_cast<long long>(done_), static_cast<long long>(total_), secs);
  std::fflush(stderr);
}

}  // namespace kiln::cli
