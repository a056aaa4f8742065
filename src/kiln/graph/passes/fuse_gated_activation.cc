#include "kiln/graph/passes/fuse_gated_activation.h"

#include "kiln/graph/passes/rewrite.h"

namespace kiln::graph {
namespace {

std::optional<Op> fused_op(Op activation) {
  if (activation == Op::Gelu) return Op::GeluMul;
  if (activation == Op::Silu) return Op::SiluMul;
  return std::nullopt;
}

bool fuse_one(Graph& g, PassResult& result) {
  const UseMap uses(g);
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& mul = g.node(i);
    if (mul.op != Op::Mul || g.type(mul.inputs[0]) != g.type(mul.inputs[1])) continue;
    for (int gate_slot : {0, 1}) {
      const Value gate = mul.inputs[gate_slot];
      const Node& act = g.node(gate.node);
      const auto op = fused_op(act.op);
      if (!op || !uses.only_user_is(gate, i)) continue;
      Node fused;
      fused.op = *op;
      fused.inputs = {act.inputs[0], mul.inputs[1 - gate_slot]};
      fused.outputs = mul.outputs;
      if (replace_with_fused(g, i, std::move(fused), {{Value{i, 0}, 0}}, {i, gate.node})) {
        result.count("patterns_fused");
        return true;
      }
    }
  }
  return false;
}

}  // namespace

PassResult run_fuse_gated_activation(Graph& g, const PassOptions&) {
  PassResult result;
  while (fuse_one(g, result)) {
  }
  return result;
}

}  // namespace kiln::graph
