// Internal: one ISA's row reductions.
#pragma once
#include <cstdint>

namespace kiln::kernels::detail {

struct ReduceFns {
  // Maximum of x[0..n) ignoring NaN (-inf if none).
  float (*max_row)(const float* x, int64_t n);
  // First index i with x[i] == value, or n.
  int64_t (*find_equal)(const float* x, int64_t n, float value);
};

extern const ReduceFns kReduceScalar;
extern const ReduceFns kReduceAvx2;
extern const ReduceFns kReduceAvx512;

}  // namespace kiln::kernels::detail
