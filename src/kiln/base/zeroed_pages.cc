#include "kiln/base/zeroed_pages.h"

#include <sys/mman.h>

#include <cstdint>
#include <new>
#include <utility>

namespace kiln {
namespace {
constexpr size_t kHuge = size_t{2} << 20;
}  // namespace

ZeroedPages::ZeroedPages(size_t bytes) : bytes_(bytes) {
  if (bytes == 0) return;
  mapped_ = (bytes + kHuge - 1) / kHuge * kHuge;
  // Map one huge page more than needed, then unmap the misaligned head and the tail.
  const size_t span = mapped_ + kHuge;
  void* p = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  auto* base = static_cast<char*>(p);
  const auto addr = reinterpret_cast<uintptr_t>(base);
  char* aligned = base + ((kHuge - addr % kHuge) % kHuge);
  if (aligned > base) munmap(base, static_cast<size_t>(aligned - base));
  char* end = aligned + mapped_;
  if (end < base + span) munmap(end, static_cast<size_t>(base + span - end));
  madvise(aligned, mapped_, MADV_HUGEPAGE);  // advisory: failure only costs speed
  data_ = aligned;
}

ZeroedPages::~ZeroedPages() { release(); }

ZeroedPages::ZeroedPages(ZeroedPages&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)),
      mapped_(std::exchange(other.mapped_, 0)) {}

ZeroedPages& ZeroedPages::operator=(ZeroedPages&& other) noexcept {
  if (this != &other) {
    release();
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
    mapped_ = std::exchange(other.mapped_, 0);
  }
  return *this;
}

void ZeroedPages::release() {
  if (data_ != nullptr) munmap(data_, mapped_);
  data_ = nullptr;
  bytes_ = mapped_ = 0;
}

}  // namespace kiln
