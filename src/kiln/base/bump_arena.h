// Hands out 64-byte-aligned pieces of large chunks, in allocation order. Weights packed in the
// order a forward pass reads them then lie in one address stream on transparent huge pages
// (aligned_alloc64 gives those to large buffers): the matmuls of a step stream through memory
// without a TLB miss per 4 KiB, and a prefetch past one weight's end lands in the next one's
// start. Thread-safe. Each piece keeps its chunk alive; nothing is freed piece by piece.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

namespace kiln {

class BumpArena {
 public:
  explicit BumpArena(size_t chunk_bytes = size_t{64} << 20);
  // An uninitialized piece of `bytes` (a request larger than a chunk gets a chunk of its own).
  std::shared_ptr<uint8_t> allocate(size_t bytes);
  // Bytes of all chunks allocated so far (address space; untouched pages cost no memory).
  size_t reserved_bytes() const;

 private:
  mutable std::mutex mu_;
  size_t chunk_bytes_;
  std::shared_ptr<uint8_t> chunk_;
  size_t chunk_size_ = 0;
  size_t used_ = 0;
  size_t reserved_ = 0;
};

}  // namespace kiln
