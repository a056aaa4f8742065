#include "kiln/base/tensor.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "kiln/base/error.h"

namespace kiln {

void* aligned_alloc64(size_t bytes) {
  // Large buffers (packed weights, the KV pool, big activations) are streamed end to end every
  // step: on 2 MiB transparent huge pages a stream takes no TLB miss per 4 KiB and the kernel
  // zeroes them in few faults. Most kernels only give huge pages to madvise'd ranges, and
  // those must be 2 MiB-aligned to be backed by them.
  constexpr size_t kHuge = size_t{2} << 20;
  if (bytes >= 2 * kHuge) {
    void* p = nullptr;
    if (posix_memalign(&p, kHuge, (bytes + kHuge - 1) / kHuge * kHuge) != 0) throw std::bad_alloc();
    madvise(p, bytes, MADV_HUGEPAGE);  // advisory: failure only costs speed
    return p;
  }
  size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

void aligned_free(void* p) { std::free(p); }

Tensor Tensor::empty(DType dtype, const Shape& shape) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.set_contiguous_strides();
  size_t bytes = t.nbytes();
  void* p = aligned_alloc64(bytes);
  std::memset(p, 0, bytes);
  t.data_ = p;
  t.keepalive_ =
      std::shared_ptr<const void>(p, [](const void* q) { aligned_free(const_cast<void*>(q)); });
  return t;
}

Tensor Tensor::borrow(DType dtype, const Shape& shape, void* data,
                      std::shared_ptr<const void> keepalive) {
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = shape;
  t.set_contiguous_strides();
  t.data_ = data;
  t.keepalive_ = std::move(keepalive);
  return t;
}

void Tensor::set_contiguous_strides() {
  int64_t s = 1;
  for (int i = shape_.rank() - 1; i >= 0; --i) {
    strides_[i] = s;
    s *= shape_[i];
  }
}

bool Tensor::contiguous() const {
  int64_t s = 1;
  for (int i = shape_.rank() - 1; i >= 0; --i) {
    if (shape_[i] != 1 && strides_[i] != s) return false;
    s *= shape_[i];
  }
  return true;
}

Tensor Tensor::reshaped(const Shape& shape) const {
  KILN_CHECK(shape.numel() == shape_.numel(), "cannot reshape {} to {}", shape_.str(), shape.str());
  KILN_CHECK(contiguous(), "cannot reshape a strided tensor");
  Tensor t = *this;
  t.shape_ = shape;
  t.set_contiguous_strides();
  return t;
}

Tensor Tensor::slice_rows(int64_t begin, int64_t end) const {
  KILN_CHECK(shape_.rank() >= 1 && 0 <= begin && begin <= end && end <= shape_[0],
             "row slice [{}, {}) out of range for {}", begin, end, shape_.str());
  Tensor t = *this;
  t.shape_[0] = end - begin;
  size_t row0_bytes = dtype_bytes(dtype_, strides_[0]);
  t.data_ = static_cast<char*>(data_) + begin * row0_bytes;
  return t;
}

}  // namespace kiln
