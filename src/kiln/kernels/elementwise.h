// Elementwise float32 kernels. `out` may alias any input (in-place). Threads split the
// elements in 64-byte aligned ranges; every element's value depends only on its inputs, so
// results are the same for any batch composition or thread count.
//
// Accuracy: add/mul/scale/add_row_broadcast are exact IEEE operations (all ISAs agree bit for
// bit). gelu_tanh, silu and softcap use vector exp/tanh approximations in the AVX paths (a few
// ulp, < 1e-6 relative error) and libm in the scalar path.
#pragma once
#include <cstdint>

#include "kiln/kernels/exec_context.h"

namespace kiln::kernels {

void add(const float* a, const float* b, float* out, int64_t n, const ExecContext& ctx);
// out[r, c] = a[r, c] + b_row[c] (bias add).
void add_row_broadcast(const float* a, const float* b_row, float* out, int64_t rows, int64_t cols,
                       const ExecContext& ctx);
void mul(const float* a, const float* b, float* out, int64_t n, const ExecContext& ctx);
void scale(const float* x, float factor, float* out, int64_t n, const ExecContext& ctx);
// 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))), the "gelu_pytorch_tanh" of Gemma.
void gelu_tanh(const float* x, float* out, int64_t n, const ExecContext& ctx);
// 0.5x(1 + erf(x / sqrt(2))), the exact GELU of BERT ("gelu" in its config). The AVX paths use
// a polynomial erf (< 1.5e-7 absolute error), the scalar path libm.
void gelu_erf(const float* x, float* out, int64_t n, const ExecContext& ctx);
// x * sigmoid(x).
void silu(const float* x, float* out, int64_t n, const ExecContext& ctx);
// cap * tanh(x / cap); cap must be > 0.
void softcap(const float* x, float cap, float* out, int64_t n, const ExecContext& ctx);
// gelu_tanh(gate) * up, bit-identical to gelu_tanh followed by mul.
void gelu_mul(const float* gate, const float* up, float* out, int64_t n, const ExecContext& ctx);
// silu(gate) * up, bit-identical to silu followed by mul.
void silu_mul(const float* gate, const float* up, float* out, int64_t n, const ExecContext& ctx);

}  // namespace kiln::kernels
