// A STREAM-like read bandwidth figure measured in-process, on the same threads the model uses,
// as the denominator of "fraction of memory bandwidth" in `kiln bench`.
#pragma once
#include <cstddef>

#include "kiln/base/thread_pool.h"

namespace kiln::cli {

// Reads a `bytes` buffer (touched once first, so page faults are not timed) `repeats` times,
// each thread summing its contiguous share; returns the best rate in GB/s (1e9 bytes/s).
double measure_read_bandwidth_gbs(ThreadPool& pool, size_t bytes = size_t{1} << 30,
                                  int repeats = 3);

}  // namespace kiln::cli
