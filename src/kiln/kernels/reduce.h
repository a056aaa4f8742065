// Row reductions: greedy argmax, the graph's last op for greedy batches. (Sampling's softmax and
// top-k are engine/sampler.cc's own scalar loops: their summation order fixes the sampled bits,
// which a vectorized softmax would change.)
#pragma once
#include <cstdint>

#include "kiln/kernels/exec_context.h"

namespace kiln::kernels {

// out[r] = index of the largest value of row r of x [rows, cols]; ties go to the lowest
// index; NaN never wins (a row of only NaN gives 0). Exact: every ISA gives the same answer.
// Threads split the rows.
void argmax_rows(const float* x, int64_t rows, int64_t cols, int32_t* out, const ExecContext& ctx);

}  // namespace kiln::kernels
