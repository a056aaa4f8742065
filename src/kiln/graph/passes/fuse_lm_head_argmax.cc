#include "kiln/graph/passes/fuse_lm_head_argmax.h"

#include "kiln/graph/passes/rewrite.h"

namespace kiln::graph {
namespace {

bool fuse_one(Graph& g, PassResult& result) {
  const UseMap uses(g);
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& argmax = g.node(i);
    if (argmax.op != Op::Argmax) continue;
    const Value logits = argmax.inputs[0];
    const Node* mm = producer_if(g, logits, Op::Matmul);
    if (!mm || !uses.only_user_is(logits, i)) continue;
    const Value normed = mm->inputs[0];
    const Node* norm = producer_if(g, normed, Op::RmsNorm);
    if (!norm || !uses.only_user_is(normed, logits.node) || g.type(normed).shape.rank() != 2)
      continue;
    Node fused;
    fused.op = Op::NormMatmulArgmax;
    fused.inputs = {norm->inputs[0], norm->inputs[1], mm->inputs[1]};
    fused.attrs.set("eps", norm->attrs.get_float("eps"));
    fused.outputs = argmax.outputs;
    if (replace_with_fused(g, i, std::move(fused), {{Value{i, 0}, 0}},
                           {i, logits.node, normed.node})) {
      result.count("patterns_fused");
      return true;
    }
  }
  return false;
}

}  // namespace

PassResult run_fuse_lm_head_argmax(Graph& g, const PassOptions&) {
  PassResult result;
  while (fuse_one(g, result)) {
  }
  return result;
}

}  // namespace kiln::graph
