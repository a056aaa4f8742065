#include "kiln/graph/buffer_cache.h"

#include <algorithm>

namespace kiln::graph {
namespace {

// Sizes are rounded up so that prefill chunks of slightly different lengths share buffers.
size_t size_class(size_t bytes) {
  const size_t granule = bytes >= (size_t{1} << 20) ? size_t{1} << 20 : 4096;
  return (std::max<size_t>(bytes, 1) + granule - 1) / granule * granule;
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
