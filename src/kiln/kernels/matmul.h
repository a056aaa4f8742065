// y = x * W^T over a PackedWeight, the GEMV/GEMM of every linear layer.
//
// Every function here is called on all threads of a worker group at once (ctx.tid in
// [0, ctx.nth)), with the same arguments. Phase 1 (matmul_acts.h) quantizes the activation rows
// to int8 (under the bf16 contract: rounds them to bf16 tiles; rows split across threads) into
// `scratch`, then ctx.sync(); phase 2 splits the OUTPUT COLUMNS
// (16-column groups) across threads, so each weight byte is read once per call and one pass
// over a group's weights serves every row of the batch (rows are tiled inside).
//
// Results are batch invariant and deterministic: each output element is bit-identical whatever
// m is, whichever rows share the batch, however columns are split across threads, and whichever
// ISA tier runs (see matmul_kernels.h for the arithmetic), within one contract: the opt-in bf16
// contract (base/amx.h) has bits of its own. matmul, matmul_split and a
// pack_concat'ed weight give the same bits per column.
//
// The functions return without a final barrier: the caller synchronizes the group before
// reading the outputs or reusing the scratch. x must not overlap any output.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kiln/kernels/exec_context.h"
#include "kiln/kernels/packed_weight.h"

namespace kiln::kernels {

// Scratch bytes matmul / matmul_split need for m rows (0 for float weights). Scratch must be at
// least 4-byte aligned (64 is best) and is shared by the whole group.
size_t matmul_scratch_bytes(const PackedWeight& w, int64_t m);

// y[m, N] = x[m, K] * W^T (+ residual[m, N] when non-null; residual may alias y).
void matmul(const PackedWeight& w, const float* x, int64_t m, float* y, const float* residual,
            void* scratch, const ExecContext& ctx);

// The same product with the N output columns written to n_splits buffers: outs[i] is
// [m, split_cols[i]] and receives the next split_cols[i] columns (sum = N).
void matmul_split(const PackedWeight& w, const float* x, int64_t m, float* const* outs,
                  const int64_t* split_cols, int n_splits, void* scratch, const ExecContext& ctx);

// Greedy head: out_ids[i] = argmax over the N outputs of row i, without writing them. Ties go to
// the lowest column; NaN outputs never win; a row with no non-NaN output gives 0. Equals the
// argmax of matmul's output.
size_t matmul_argmax_scratch_bytes(const PackedWeight& w, int64_t m, int nth);
void matmul_argmax(const PackedWeight& w, const float* x, int64_t m, int32_t* out_ids,
                   void* scratch, const ExecContext& ctx);

}  // namespace kiln::kernels
