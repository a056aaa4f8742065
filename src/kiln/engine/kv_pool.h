// The paged KV pool: K and V of every layer, f16 or q8, as planes [2 * layers][pages][page_size]
// [kv_heads * head_dim] (kernels/kv_cache.h owns the exact layout, q8's scale planes included;
// docs/architecture.md, Terms: "Paged KV pool"), plus the free-page allocator. One contiguous
// allocation whose address never changes: the graph takes the whole pool as a single *state* input
// and mutates it in place.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kiln/base/zeroed_pages.h"
#include "kiln/kernels/kv_cache.h"

namespace kiln::engine {

struct KvPoolConfig {
  int n_layers = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int page_size = 16;
  int64_t n_pages = 0;
  kernels::KvDtype dtype = kernels::KvDtype::F16;

  kernels::KvGeometry geometry() const {
    return {n_layers, n_pages, page_size, n_kv_heads, head_dim, dtype};
  }
};

class KvPool {
 public:
  explicit KvPool(const KvPoolConfig& config);
  ~KvPool();
  KvPool(const KvPool&) = delete;
  KvPool& operator=(const KvPool&) = delete;

  const KvPoolConfig& config() const { return config_; }
  int page_size() const { return config_.page_size; }
  int64_t n_pages() const { return config_.n_pages; }
  size_t bytes() const { return bytes_; }
  // Base address of the whole pool (the graph's state input).
  void* data() const { return data_; }
  kernels::KvDtype dtype() const { return config_.dtype; }
  kernels::KvLayerView layer(int layer) const;

  // Page allocator. alloc returns false (and takes nothing) when fewer than n pages are free.
  bool alloc(int64_t n, std::vector<int32_t>& out);
  void free(const std::vector<int32_t>& pages);
  void free_page(int32_t page);
  int64_t free_pages() const { return static_cast<int64_t>(free_list_.size()); }
  int64_t used_pages() const { return config_.n_pages - free_pages(); }

 private:
  KvPoolConfig config_;
  size_t bytes_ = 0;
  ZeroedPages memory_;  // resident only where a page has been written
  void* data_ = nullptr;
  std::vector<int32_t> free_list_;
  std::vector<uint8_t> is_free_;  // catches double frees
};

}  // namespace kiln::engine
