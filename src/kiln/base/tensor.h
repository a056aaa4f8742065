// A typed view of memory with a shape. Storage is either owned (allocated here, 64-byte aligned)
// or borrowed (a region of an mmap'd file, an arena slot); `keepalive` holds what the borrowed
// bytes live in so a Tensor never outlives its memory. Rows are contiguous; outer dimensions
// may be strided (element strides, row-major).
#pragma once
#include <cstdint>
#include <memory>

#include "kiln/base/dtype.h"
#include "kiln/base/shape.h"

namespace kiln {

class Tensor {
 public:
  Tensor() = default;
  // Allocates zeroed, 64-byte-aligned storage.
  static Tensor empty(DType dtype, const Shape& shape);
  // Borrows `data`; keepalive (may be null) owns the memory it points into.
  static Tensor borrow(DType dtype, const Shape& shape, void* data,
                       std::shared_ptr<const void> keepalive = nullptr);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t numel() const { return shape_.numel(); }
  size_t nbytes() const { return dtype_bytes(dtype_, shape_.numel()); }
  // Element stride of dimension i (contiguous unless made otherwise).
  int64_t stride(int i) const { return strides_[i < 0 ? i + shape_.rank() : i]; }
  bool contiguous() const;
  // Bytes from one row to the next (row = last dimension).
  size_t row_bytes() const { return dtype_bytes(dtype_, shape_.cols()); }

  void* data() const { return data_; }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data_);
  }
  bool defined() const { return data_ != nullptr || shape_.numel() == 0; }

  // Same bytes, new shape (element count must match, tensor must be contiguous).
  Tensor reshaped(const Shape& shape) const;
  // Rows [begin, end) of the outermost dimension.
  Tensor slice_rows(int64_t begin, int64_t end) const;

 private:
  void set_contiguous_strides();

  DType dtype_ = DType::F32;
  Shape shape_;
  int64_t strides_[Shape::kMaxRank] = {};
  void* data_ = nullptr;
  std::shared_ptr<const void> keepalive_;
};

// 64-byte-aligned allocation helpers (cache line and AVX-512 register width).
void* aligned_alloc64(size_t bytes);
void aligned_free(void* p);

}  // namespace kiln
