// The mixture-of-experts FFN of Qwen3-MoE-style models, for T rows at once:
//   logits = x W_router^T;  p = softmax(logits);  the top-k experts of p (ties: lowest index
//   first), weights p_j (divided by their sum when norm_topk_prob);
//   y = sum_j w_j * down_j(silu(gate_j(x)) * up_j(x)), summed in rank order j = 0..k-1.
//
// The routing depends on the data, the shapes do not: every call computes this step's top-k per
// row, groups the rows by expert (in increasing row order) and runs each used expert's gate/up
// and down matmuls over just its rows, with the output columns of each matmul split across the
// threads as every matmul does (so both threads stream every used expert's weights).
//
// Batch invariant like the matmul it is built from: a row's result does not depend on which other
// rows share the call, on the thread count or on the order of the rows (the matmul contract makes
// every expert row independent of the expert's row count; the softmax, top-k and the final sum
// read only the row's own values in a fixed order).
//
// Called on all threads of a group at once (see matmul.h); returns without a final barrier.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kiln/kernels/exec_context.h"
#include "kiln/kernels/packed_experts.h"
#include "kiln/kernels/packed_weight.h"

namespace kiln::kernels {

struct MoeFfnWeights {
  const PackedWeight* router = nullptr;    // [E, D]
  const PackedExperts* gate_up = nullptr;  // E x [2F, D]: gate rows, then up rows
  const PackedExperts* down = nullptr;     // E x [D, F]
  int top_k = 1;
  bool norm_topk_prob = true;
};

// Scratch bytes (64-byte aligned, shared by the group) moe_ffn needs for m rows.
size_t moe_ffn_scratch_bytes(const MoeFfnWeights& w, int64_t m);

// y[m, D] = the MoE FFN of x[m, D]. x and y must not overlap.
void moe_ffn(const MoeFfnWeights& w, const float* x, int64_t m, float* y, void* scratch,
             const ExecContext& ctx);

// The routing of one row (exposed for tests): `row` holds the router logits [n_experts] and is
// overwritten with their softmax; ids and weights receive the top_k experts in rank order.
void moe_route_row(float* row, int64_t n_experts, int top_k, bool norm_topk_prob, int32_t* ids,
                   float* weights);

}  // namespace kiln::kernels
