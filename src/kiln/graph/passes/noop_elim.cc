#include "kiln/graph/passes/noop_elim.h"

#include "kiln/graph/passes/rewrite.h"

namespace kiln::graph {

PassResult run_noop_elim(Graph& g, const PassOptions&) {
  PassResult result;
  std::vector<int> bypassed;
  // forward[i]: the value node i's output is replaced by (invalid: kept). Uses are redirected
  // as the sweep reaches them rather than by a walk of the whole graph per no-op.
  std::vector<Value> forward(g.num_nodes());
  auto redirect = [&](Value& v) {
    if (v.index == 0 && forward[v.node].valid()) v = forward[v.node];
  };
  graph_nodes_walked() += g.num_nodes();
  for (int i = 0; i < g.num_nodes(); ++i) {
    Node& n = g.node(i);
    for (Value& in : n.inputs) redirect(in);
    // reshape(reshape(x)) => reshape(x): reshapes only reinterpret the same bytes.
    if (n.op == Op::Reshape && g.node(n.inputs[0].node).op == Op::Reshape) {
      bypassed.push_back(n.inputs[0].node);
      n.inputs[0] = g.node(n.inputs[0].node).inputs[0];
      result.count("reshape_chains_shortened");
    }
    bool identity = false;
    switch (n.op) {
      case Op::Reshape:  // to its input's own shape => x
        identity = g.type(n.inputs[0]) == n.outputs[0];
        break;
      case Op::Copy:  // copy(x) => x
        identity = true;
        break;
      case Op::Cast:  // to its input's own dtype => x
        identity = g.type(n.inputs[0]).dtype == n.outputs[0].dtype;
        break;
      case Op::Scale:  // by 1 => x
        identity = n.attrs.get_float("factor") == 1.0;
        break;
      default:
        break;
    }
    if (!identity) continue;
    forward[i] = n.inputs[0];
    bypassed.push_back(i);
    result.count("noops_removed");
  }
  for (Value& out : g.outputs()) redirect(out);
  const int removed = remove_unused(g, bypassed);
  result.count("nodes_removed", removed);
  return result;
}

}  // namespace kiln::graph
