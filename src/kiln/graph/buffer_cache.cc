#include "kiln/graph/buffer_cache.h"

#include <algorithm>
#include <bit>

namespace kiln::graph {
namespace {

// Sizes are rounded up so that values of nearby sizes share buffers: 4 KiB granules up to
// 64 KiB, then four classes per power of two (at most 25% slack). A server's eager steps see
// every chunk length and batch size; with fine-grained classes each new length added buffers
// of its own and the cache crept up towards its limit over hours (a soak test showed RSS
// growing steadily). Geometric classes bound the distinct sizes to a few dozen.
size_t size_class(size_t bytes) {
  constexpr size_t kSmall = size_t{64} << 10;
  bytes = std::max<size_t>(bytes, 1);
  if (bytes <= kSmall) return (bytes + 4095) / 4096 * 4096;
  const int octave = static_cast<int>(std::bit_width(bytes - 1)) - 1;  // 2^octave < bytes
  const size_t step = size_t{1} << (octave - 2);
  return (bytes + step - 1) / step * step;
}

}  // namespace

BufferCache::~BufferCache() {
  for (auto& [size, buffers] : free_)
    for (void* p : buffers) aligned_free(p);
}

Tensor BufferCache::allocate(const std::shared_ptr<BufferCache>& cache, DType dtype,
                             const Shape& shape) {
  const size_t cls = size_class(dtype_bytes(dtype, shape.numel()));
  void* p = nullptr;
  {
    std::lock_guard lock(cache->mu_);
    auto it = cache->free_.find(cls);
    if (it != cache->free_.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
      cache->cached_bytes_ -= cls;
    } else {
      cache->allocated_bytes_ += cls;
    }
  }
  if (p == nullptr) p = aligned_alloc64(cls);
  std::shared_ptr<const void> owner(
      p, [cache, cls](const void* q) { cache->give_back(const_cast<void*>(q), cls); });
  return Tensor::borrow(dtype, shape, p, std::move(owner));
}

void BufferCache::give_back(void* p, size_t size_class) {
  {
    std::lock_guard lock(mu_);
    if (cached_bytes_ + size_class <= max_cached_bytes_) {
      free_[size_class].push_back(p);
      cached_bytes_ += size_class;
      return;
    }
  }
  aligned_free(p);
}

size_t BufferCache::cached_bytes() const {
  std::lock_guard lock(mu_);
  return cached_bytes_;
}

size_t BufferCache::allocated_bytes() const {
  std::lock_guard lock(mu_);
  return allocated_bytes_;
}

}  // namespace kiln::graph
