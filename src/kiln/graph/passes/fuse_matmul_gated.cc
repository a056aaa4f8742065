#include "kiln/graph/passes/fuse_matmul_gated.h"

#include <optional>

#include "kiln/graph/passes/rewrite.h"

namespace kiln::graph {
namespace {

std::optional<Op> fused_op(Op activation) {
  if (activation == Op::GeluMul) return Op::MatmulGeluMul;
  if (activation == Op::SiluMul) return Op::MatmulSiluMul;
  return std::nullopt;
}

// Rewrites the match anchored at gelu_mul / silu_mul node `i`; returns the fused node's id, or
// -1.
int fuse_at(Rewriter& rw, int i) {
  const Graph& g = rw.graph();
  const Node& act = g.node(i);
  const auto op = fused_op(act.op);
  if (!op) return -1;
  const Value gate = act.inputs[0], up = act.inputs[1];
  const Node* mm = producer_if(g, gate, Op::MatmulSplit);
  if (!mm || up.node != gate.node || mm->outputs.size() != 2 || gate.index != 0 || up.index != 1)
    return -1;
  const auto& splits = mm->attrs.get_ints("splits");
  if (splits.size() != 2 || splits[0] != splits[1]) return -1;
  if (!rw.only_user_is(gate, i) || !rw.only_user_is(up, i)) return -1;
  Node fused;
  fused.op = *op;
  fused.inputs = {mm->inputs[0], mm->inputs[1]};
  fused.outputs = act.outputs;
  return rw.replace_with_fused(i, std::move(fused), {{Value{i, 0}, 0}}, {i, gate.node});
}

}  // namespace

PassResult run_fuse_matmul_gated(Graph& g, const PassOptions&) {
  PassResult result;
  result.count("patterns_fused", rewrite_sweep(g, fuse_at));
  return result;
}

}  // namespace kiln::graph
