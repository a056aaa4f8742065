#include "kiln/graph/passes/noop_elim.h"

#include "kiln/graph/passes/rewrite.h"

namespace kiln::graph {

PassResult run_noop_elim(Graph& g, const PassOptions&) {
  PassResult result;
  std::vector<int> bypassed;
  for (int i = 0; i < g.num_nodes(); ++i) {
    Node& n = g.node(i);
    const Value self{i, 0};
    // reshape(reshape(x)) => reshape(x): reshapes only reinterpret the same bytes.
    if (n.op == Op::Reshape && g.node(n.inputs[0].node).op == Op::Reshape) {
      bypassed.push_back(n.inputs[0].node);
      n.inputs[0] = g.node(n.inputs[0].node).inputs[0];
      result.count("reshape_chains_shortened");
    }
    const Node& node = g.node(i);
    bool identity = false;
    switch (node.op) {
      case Op::Reshape:  // to its input's own shape => x
        identity = g.type(node.inputs[0]) == node.outputs[0];
        break;
      case Op::Copy:  // copy(x) => x
        identity = true;
        break;
      case Op::Cast:  // to its input's own dtype => x
        identity = g.type(node.inputs[0]).dtype == node.outputs[0].dtype;
        break;
      case Op::Scale:  // by 1 => x
        identity = node.attrs.get_float("factor") == 1.0;
        break;
      default:
        break;
    }
    if (!identity) continue;
    g.replace_all_uses(self, node.inputs[0]);
    bypassed.push_back(i);
    result.count("noops_removed");
  }
  const int removed = remove_unused(g, bypassed);
  result.count("nodes_removed", removed);
  return result;
}

}  // namespace kiln::graph
