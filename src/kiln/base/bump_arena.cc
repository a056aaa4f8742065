#include "kiln/base/bump_arena.h"

#include "kiln/base/error.h"
#include "kiln/base/tensor.h"

namespace kiln {
namespace {

std::shared_ptr<uint8_t> new_chunk(size_t bytes) {
  auto* p = static_cast<uint8_t*>(aligned_alloc64(bytes));
  return std::shared_ptr<uint8_t>(p, [](uint8_t* q) { aligned_free(q); });
}

}  // namespace

BumpArena::BumpArena(size_t chunk_bytes) : chunk_bytes_(chunk_bytes) {
  KILN_CHECK(chunk_bytes_ >= 64, "arena chunks must hold at least 64 bytes");
}

std::shared_ptr<uint8_t> BumpArena::allocate(size_t bytes) {
  const size_t rounded = (bytes + 63) / 64 * 64;
  std::lock_guard lock(mu_);
  if (rounded > chunk_bytes_) {  // its own chunk; the current one stays open for small pieces
    reserved_ += rounded;
    return new_chunk(rounded);
  }
  if (chunk_ == nullptr || used_ + rounded > chunk_size_) {
    chunk_ = new_chunk(chunk_bytes_);
    chunk_size_ = chunk_bytes_;
    used_ = 0;
    reserved_ += chunk_bytes_;
  }
  // Aliasing constructor: the piece shares ownership of the whole chunk.
  std::shared_ptr<uint8_t> piece(chunk_, chunk_.get() + used_);
  used_ += rounded;
  return piece;
}

size_t BumpArena::reserved_bytes() const {
  std::lock_guard lock(mu_);
  return reserved_;
}

}  // namespace kiln
