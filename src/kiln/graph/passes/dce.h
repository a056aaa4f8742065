// dce: dead code elimination. Removes every node whose outputs no graph output and no
// side-effecting op depends on, including unused params (so a weight replaced by a merged or
// derived one is not loaded).
// Does NOT remove: side-effecting ops (KV writes) even when their token is unused, graph
// outputs, or `input` and `state` sources (they are the graph's calling interface).
#pragma once
#include "kiln/graph/passes/pass.h"

namespace kiln::graph {

PassResult run_dce(Graph& graph, const PassOptions& options);

}  // namespace kiln::graph
