#include "kiln/graph/passes/fuse_gated_activation.h"

#include "kiln/graph/passes/rewrite.h"

namespace kiln::graph {
namespace {

std::optional<Op> fused_op(Op activation) {
  if (activation == Op::Gelu) return Op::GeluMul;
  if (activation == Op::Silu) return Op::SiluMul;
  return std::nullopt;
}

// Rewrites the match anchored at mul node `i`; returns the fused node's id, or -1.
int fuse_at(Rewriter& rw, int i) {
  const Graph& g = rw.graph();
  if (g.node(i).op != Op::Mul || g.type(g.node(i).inputs[0]) != g.type(g.node(i).inputs[1]))
    return -1;
  for (int gate_slot : {0, 1}) {
    const Node& mul = g.node(i);
    const Value gate = mul.inputs[gate_slot];
    const Node& act = g.node(gate.node);
    const auto op = fused_op(act.op);
    if (!op || !rw.only_user_is(gate, i)) continue;
    Node fused;
    fused.op = *op;
    fused.inputs = {act.inputs[0], mul.inputs[1 - gate_slot]};
    fused.outputs = mul.outputs;
    const int id = rw.replace_with_fused(i, std::move(fused), {{Value{i, 0}, 0}}, {i, gate.node});
    if (id >= 0) return id;
  }
  return -1;
}

}  // namespace

PassResult run_fuse_gated_activation(Graph& g, const PassOptions&) {
  PassResult result;
  result.count("patterns_fused", rewrite_sweep(g, fuse_at));
  return result;
}

}  // namespace kiln::graph
