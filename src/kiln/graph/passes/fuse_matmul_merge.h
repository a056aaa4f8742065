// fuse_matmul_merge: several projections of the same activation (Q, K, V; gate and up) become
// one GEMM over a weight whose rows are theirs stacked, so x is read once and the threads split
// one larger N:
//   %q = matmul(%x, %wq) ; %k = matmul(%x, %wk) ; %v = matmul(%x, %wv)
//     =>   %wqkv = param "wq+wk+wv" {concat=["wq","wk","wv"]} : dtype[Nq+Nk+Nv, K]
//          %q, %k, %v = matmul_split(%x, %wqkv) {splits=[Nq,Nk,Nv]}
// The runtime materializes a {concat} param once at load by stacking the named params' rows.
// Matmuls merge when they read the same x and plain params (not derived) of one dtype; the
// merged node sits where the first of them was, outputs in their order.
// Refuses: weights of different dtypes (their rows cannot share one buffer), weights that are
// computed or derived rather than plain params, and a single matmul.
// Does NOT: merge matmuls of different inputs, or split a group into dtype-compatible subsets
// beyond grouping by dtype.
#pragma once
#include "kiln/graph/passes/pass.h"

namespace kiln::graph {

PassResult run_fuse_matmul_merge(Graph& graph, const PassOptions& options);

}  // namespace kiln::graph
