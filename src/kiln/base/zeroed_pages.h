// A large zero-filled buffer that costs memory only where it is written: anonymous pages from
// mmap, which the kernel maps to zeros lazily (a memset would make every byte resident up
// front). 2 MiB-aligned and madvise'd for transparent huge pages, like aligned_alloc64's
// large buffers. Used for the KV pool, sized for the worst case but mostly untouched.
#pragma once
#include <cstddef>

namespace kiln {

class ZeroedPages {
 public:
  ZeroedPages() = default;
  explicit ZeroedPages(size_t bytes);  // throws std::bad_alloc when the mapping fails
  ~ZeroedPages();
  ZeroedPages(ZeroedPages&& other) noexcept;
  ZeroedPages& operator=(ZeroedPages&& other) noexcept;
  ZeroedPages(const ZeroedPages&) = delete;
  ZeroedPages& operator=(const ZeroedPages&) = delete;

  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  void release();
  void* data_ = nullptr;
  size_t bytes_ = 0;   // what was asked for
  size_t mapped_ = 0;  // what is mapped at data_ (bytes_ rounded up to the huge page size)
};

}  // namespace kiln
