#include "progress_bar.h"

#include <unistd.h>

#include <cstdio>

namespace kiln::cli {

ProgressBar::ProgressBar() : enabled_(::isatty(STDERR_FILENO) != 0) {}

void ProgressBar::update(const char* stage, int64_t done, int64_t total) {
  if (!enabled_ || total <= 0) return;
  auto now = std::chrono::steady_clock::now();
  bool finished = done >= total;
  // Redrawing every call would cost more than the work on fast stages.
  if (!finished && stage == last_stage_ && now - last_draw_ < std::chrono::milliseconds(50)) return;
  last_stage_ = stage;
  last_draw_ = now;
  constexpr int kWidth = 30;
  int filled = static_cast<int>(kWidth * done / total);
  std::string bar(filled, '#');
  bar.resize(kWidth, ' ');
  std::fprintf(stderr, "\r%-10s [%s] %lld/%lld", stage, bar.c_str(), static_cast<long long>(done),
               static_cast<long long>(total));
  if (finished) std::fputc('\n', stderr);
  std::fflush(stderr);
}

}  // namespace kiln::cli
