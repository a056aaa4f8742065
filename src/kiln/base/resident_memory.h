// This process's memory as the kernel counts it (/proc/self/status), for the figure printed
// after a model loads: how much of the resident set is mapped file pages (weights not yet
// released after repacking) and how much is anonymous (packed weights, KV written, plans).
#pragma once
#include <cstdint>

namespace kiln {

struct ResidentMemory {
  int64_t resident = 0;  // VmRSS
  int64_t file = 0;      // RssFile: pages of mapped files (the model file)
  int64_t anon = 0;      // RssAnon
  int64_t peak = 0;      // VmHWM: the highest resident set so far
};

// All zero where /proc is unavailable.
ResidentMemory read_resident_memory();

}  // namespace kiln
