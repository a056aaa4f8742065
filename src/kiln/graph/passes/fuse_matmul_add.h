// fuse_matmul_add: a projection added to the residual stream writes the sum directly (the
// GEMM epilogue adds the residual), so the projection's output never goes to memory:
//   %y = matmul(%x, %w) ; %s = add(%y, %r)   =>   %s = matmul_add(%x, %w, %r)   (also add(%r, %y))
// Refuses: a matmul output with another use (or that is a graph output), a residual that is a
// broadcast bias rather than a full [T,N] tensor, and rewrites that would break effect order.
// Does NOT: fuse bias adds (a [cols] vector), or chains of several adds.
#pragma once
#include "kiln/graph/passes/pass.h"

namespace kiln::graph {

PassResult run_fuse_matmul_add(Graph& graph, const PassOptions& options);

}  // namespace kiln::graph
