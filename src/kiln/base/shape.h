// A static shape of rank 0..4, row-major (outermost dimension first, like numpy). GGUF lists
// dimensions fastest-first; the GGUF reader reverses them into this order.
#pragma once
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace kiln {

class Shape {
 public:
  static constexpr int kMaxRank = 4;

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);

  int rank() const { return rank_; }
  int64_t operator[](int i) const { return dims_[i < 0 ? i + rank_ : i]; }
  int64_t& operator[](int i) { return dims_[i < 0 ? i + rank_ : i]; }
  int64_t numel() const;
  // Product of all dimensions but the last: the number of rows of a 2-D view.
  int64_t rows() const;
  int64_t cols() const { return rank_ == 0 ? 1 : dims_[rank_ - 1]; }
  void push_back(int64_t d);

  bool operator==(const Shape& other) const;
  bool operator!=(const Shape& other) const { return !(*this == other); }
  std::string str() const;  // "[2,640]"

 private:
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

}  // namespace kiln
