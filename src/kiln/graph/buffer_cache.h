// Storage for the interpreter's values, reused across nodes and across runs. A value's buffer
// comes back here when its last handle drops (the interpreter drops each value after its last
// reader), and the next value of the same size class takes it. Eager prefill otherwise pays a
// page fault and a zero fill for every activation of every layer of every chunk; graph mode
// has its arena for this.
#pragma once
#include <cstddef>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "kiln/base/tensor.h"

namespace kiln::graph {

class BufferCache {
 public:
  // Buffers beyond this many cached bytes are freed instead of kept.
  explicit BufferCache(size_t max_cached_bytes = size_t{1} << 30)
      : max_cached_bytes_(max_cached_bytes) {}
  ~BufferCache();
  BufferCache(const BufferCache&) = delete;
  BufferCache& operator=(const BufferCache&) = delete;

  // A tensor of uninitialized storage (kernels write every element of their outputs). Its
  // storage returns to `cache` when the last handle to it drops; the cache stays alive until
  // then.
  static Tensor allocate(const std::shared_ptr<BufferCache>& cache, DType dtype,
                         const Shape& shape);

  size_t cached_bytes() const;
  size_t allocated_bytes() const;  // ever allocated from the system (cache misses)

 private:
  void give_back(void* p, size_t size_class);

  mutable std::mutex mu_;
  size_t max_cached_bytes_;
  std::unordered_map<size_t, std::vector<void*>> free_;  // by size class
  size_t cached_bytes_ = 0;
  size_t allocated_bytes_ = 0;
};

}  // namespace kiln::graph
