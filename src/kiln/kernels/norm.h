// RMS normalization and LayerNorm over the last dimension of a row-major [rows, cols] float32
// tensor. Threads split the rows; a row's result depends only on that row (batch invariant).
#pragma once
#include <cstdint>

#include "kiln/kernels/exec_context.h"

namespace kiln::kernels {

// out = x / sqrt(mean(x^2) + eps) * w, with w used as given (Gemma GGUF weights already hold
// the +1). out may alias x. The AVX paths sum squares in float over a fixed lane layout; the
// scalar path sums in double; they agree to ~1e-6 relative.
void rms_norm(const float* x, const float* w, float* out, int64_t rows, int64_t cols, float eps,
              const ExecContext& ctx);

// sum_out = a + b; norm_out = rms_norm(sum_out). Bit-identical to add() then rms_norm() on the
// same ISA: it runs the very same per-row routines, one row at a time while the row is still
// in L1. sum_out may alias a or b; norm_out must not alias a, b or sum_out.
void add_rms_norm(const float* a, const float* b, const float* w, float* sum_out, float* norm_out,
                  int64_t rows, int64_t cols, float eps, const ExecContext& ctx);

// LayerNorm with a bias (BERT's): out = (x - mean) / sqrt(var + eps) * w + b, var the biased
// variance. out may alias x. The AVX paths sum in float over a fixed lane layout, two passes
// (mean, then squared deviations); the scalar path sums in double.
void layer_norm(const float* x, const float* w, const float* b, float* out, int64_t rows,
                int64_t cols, float eps, const ExecContext& ctx);

}  // namespace kiln::kernels
