// cse: common subexpression elimination. Of two nodes with the same op, inputs, attributes and
// output types, the later one is removed and its uses read the earlier one. Runs in one
// forward sweep, so chains of duplicates collapse at once. Identical sources (same kind, name,
// attributes, type) merge too: they are the same tensor.
// Does NOT: merge side-effecting ops (two identical KV writes are two writes), look through
// commutativity (add(a,b) vs add(b,a) stay apart), or compare attributes numerically (1 vs 1.0).
#pragma once
#include "kiln/graph/passes/pass.h"

namespace kiln::graph {

PassResult run_cse(Graph& graph, const PassOptions& options);

}  // namespace kiln::graph
