// fuse_matmul_gated: a gated MLP's merged gate/up GEMM and its activation become one op whose
// epilogue applies the activation, so gate and up are never written and read back and one
// barrier goes:
//   %g, %u = matmul_split(%x, %w) {splits=[N,N]} ; %h = gelu_mul(%g, %u)
//     =>   %h = matmul_gelu_mul(%x, %w)                     (silu_mul: matmul_silu_mul)
// The kernel (kernels::matmul_gated) gives the bits of the pair it replaces.
// Refuses: a split into other than two equal halves, gate and up the wrong way round (the
// activation must take the first half), and a half with any other use or returned.
// Does NOT: fuse an activation over a plain matmul, or a merged GEMM of three or more outputs
// (QKV).
#pragma once
#include "kiln/graph/passes/pass.h"

namespace kiln::graph {

PassResult run_fuse_matmul_gated(Graph& graph, const PassOptions& options);

}  // namespace kiln::graph
