// Row reductions: greedy argmax (the graph's last op for greedy batches), and softmax and
// top-k over one vocabulary-wide row (vectorized per ISA and tested; engine/sampler.cc keeps
// its own scalar versions, which fix the sampled bits, so nothing in src calls these yet).
#pragma once
#include <cstdint>

#include "kiln/kernels/exec_context.h"

namespace kiln::kernels {

// out[r] = index of the largest value of row r of x [rows, cols]; ties go to the lowest
// index; NaN never wins (a row of only NaN gives 0). Exact: every ISA gives the same answer.
// Threads split the rows.
void argmax_rows(const float* x, int64_t rows, int64_t cols, int32_t* out, const ExecContext& ctx);

// x = softmax(x) over one row of n values (single-threaded). -inf entries become 0. Throws
// kiln::Error if n < 1 or no entry is > -inf.
void softmax_inplace(float* x, int64_t n);

// idx_out[0..k) = indices of the k largest values of x[0..n), sorted by value descending,
// ties to the lower index. NaN counts as -inf. O(n) scan with a k-entry heap (a vector
// compare skips the values that cannot enter it), O(k log k) to sort. 1 <= k <= n.
void top_k(const float* x, int64_t n, int64_t k, int32_t* idx_out);

}  // namespace kiln::kernels
