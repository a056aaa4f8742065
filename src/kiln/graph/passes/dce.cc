#include "kiln/graph/passes/dce.h"

namespace kiln::graph {

PassResult run_dce(Graph& g, const PassOptions&) {
  PassResult result;
  const int n = g.num_nodes();
  std::vector<bool> needed(n, false);
  for (const Value& out : g.outputs()) needed[out.node] = true;
  // Inputs precede their users, so one backward sweep propagates liveness completely.
  for (int i = n - 1; i >= 0; --i) {
    const Node& node = g.node(i);
    if (has_side_effect(node.op) || node.op == Op::Input || node.op == Op::State) needed[i] = true;
    if (!needed[i]) continue;
    for (const Value& in : node.inputs) needed[in.node] = true;
  }
  std::vector<bool> dead(n);
  for (int i = 0; i < n; ++i) dead[i] = !needed[i];
  result.count("nodes_removed", g.remove_nodes(dead));
  return result;
}

}  // namespace kiln::graph
