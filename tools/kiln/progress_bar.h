// A one-line progress bar on stderr for loading and capture. Draws only on a terminal, so
// logs and CI output stay clean.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace kiln::cli {

class ProgressBar {
 public:
  ProgressBar();
  // Redraws "stage [#####     ] done/total"; finishes the line when done == total.
  void update(const char* stage, int64_t done, int64_t total);

 private:
  bool enabled_;
  std::string last_stage_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace kiln::cli
