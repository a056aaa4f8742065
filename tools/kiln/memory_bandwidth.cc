#include "memory_bandwidth.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>

#include "kiln/base/error.h"
#include "kiln/base/tensor.h"

namespace kiln::cli {

double measure_read_bandwidth_gbs(ThreadPool& pool, size_t bytes, int repeats) {
  const size_t words = bytes / sizeof(uint64_t);
  KILN_CHECK(words >= 1024, "bandwidth buffer of {} bytes is too small", bytes);
  auto* data = static_cast<uint64_t*>(aligned_alloc64(words * sizeof(uint64_t)));
  KILN_CHECK(data != nullptr, "cannot allocate {} bytes for the bandwidth test", bytes);
  const int nth = pool.size();
  // First touch on the threads that read it (and non-zero so nothing can be elided).
  pool.run([&](int tid, int n) {
    const size_t b = words * tid / n, e = words * (tid + 1) / n;
    for (size_t i = b; i < e; ++i) data[i] = i;
  });
  std::vector<uint64_t> sums(static_cast<size_t>(nth) * 8);  // one cache line per thread
  double best = 0;
  for (int r = 0; r < std::max(1, repeats); ++r) {
    auto t0 = std::chrono::steady_clock::now();
    pool.run([&](int tid, int n) {
      const size_t b = words * tid / n, e = words * (tid + 1) / n;
      // Four independent accumulators keep the loop load-bound, not add-latency-bound.
      uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
      size_t i = b;
      for (; i + 4 <= e; i += 4) {
        s0 += data[i];
        s1 += data[i + 1];
        s2 += data[i + 2];
        s3 += data[i + 3];
      }
      for (; i < e; ++i) s0 += data[i];
      sums[static_cast<size_t>(tid) * 8] = s0 + s1 + s2 + s3;
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(words * sizeof(uint64_t)) / s / 1e9);
  }
  // The sums are used, so the reads are not dead code.
  uint64_t total = 0;
  for (int t = 0; t < nth; ++t) total += sums[static_cast<size_t>(t) * 8];
  aligned_free(data);
  KILN_CHECK(total != 0 || words == 0, "bandwidth test summed to zero");
  return best;
}

}  // namespace kiln::cli
