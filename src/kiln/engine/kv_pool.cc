#include "kiln/engine/kv_pool.h"

#include <unistd.h>

#include <limits>
#include <new>

#include "kiln/base/error.h"

namespace kiln::engine {

KvPool::KvPool(const KvPoolConfig& config) : config_(config) {
  bytes_ = kernels::kv_pool_bytes(config.geometry());  // checks the sizes
  // The mapping below only reserves address space, so a pool larger than the machine would
  // start fine and be killed once requests fill it: refuse it here, with the sizes.
  const long phys_pages = sysconf(_SC_PHYS_PAGES), page_bytes = sysconf(_SC_PAGESIZE);
  if (phys_pages > 0 && page_bytes > 0) {
    const double physical = static_cast<double>(phys_pages) * static_cast<double>(page_bytes);
    KILN_CHECK(static_cast<double>(bytes_) <= physical,
               "KV pool of {:.1f} GiB ({} pages of {} tokens) exceeds this machine's {:.1f} GiB of "
               "memory; ask for fewer KV tokens or a shorter context",
               static_cast<double>(bytes_) / 1073741824.0, config.n_pages, config.page_size,
               physical / 1073741824.0);
  }
  // Zero so that a kernel reading a padded (inert) row never sees NaN garbage, and untouched:
  // the pool is sized for every sequence at full context, and pages cost memory once written.
  try {
    memory_ = ZeroedPages(bytes_);
  } catch (const std::bad_alloc&) {
    fail("KV pool: cannot allocate {} bytes", bytes_);
  }
  data_ = memory_.data();

  // Pages are handed out lowest id first (the free list is a stack), which keeps tests and
  // memory access patterns predictable.
  free_list_.reserve(static_cast<size_t>(config.n_pages));
  for (int64_t p = config.n_pages - 1; p >= 0; --p) free_list_.push_back(static_cast<int32_t>(p));
  is_free_.assign(static_cast<size_t>(config.n_pages), 1);
}

KvPool::~KvPool() = default;

kernels::KvLayerView KvPool::layer(int layer) const {
  return kernels::kv_layer_view(config_.geometry(), data_, layer);
}

bool KvPool::alloc(int64_t n, std::vector<int32_t>& out) {
  KILN_CHECK(n >= 0, "KV pool: cannot allocate {} pages", n);
  if (n > free_pages()) return false;
  for (int64_t i = 0; i < n; ++i) {
    const int32_t page = free_list_.back();
    free_list_.pop_back();
    is_free_[static_cast<size_t>(page)] = 0;
    out.push_back(page);
  }
  return true;
}

void KvPool::free(const std::vector<int32_t>& pages) {
  // Mark first, push later: a bad entry (out of range, already free, or listed twice) rolls
  // the marks back so that a rejected call changes nothing.
  for (size_t i = 0; i < pages.size(); ++i) {
    const int32_t p = pages[i];
    const bool in_range = p >= 0 && p < config_.n_pages;
    if (!in_range || is_free_[static_cast<size_t>(p)]) {
      for (size_t j = 0; j < i; ++j) is_free_[static_cast<size_t>(pages[j])] = 0;
      if (!in_range) fail("KV pool: page {} out of range [0, {})", p, config_.n_pages);
      fail("KV pool: double free of page {}", p);
    }
    is_free_[static_cast<size_t>(p)] = 1;
  }
  for (int32_t p : pages) free_list_.push_back(p);
}

void KvPool::free_page(int32_t page) {
  // The analyzer takes the member free() for libc's.
  free(std::vector<int32_t>{page});  // NOLINT(clang-analyzer-unix.Malloc)
}

}  // namespace kiln::engine
