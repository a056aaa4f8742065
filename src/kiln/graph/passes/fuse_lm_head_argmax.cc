#include "kiln/graph/passes/fuse_lm_head_argmax.h"

#include "kiln/graph/passes/rewrite.h"

namespace kiln::graph {
namespace {

// Rewrites the match anchored at argmax node `i`; returns the fused node's id, or -1.
int fuse_at(Rewriter& rw, int i) {
  const Graph& g = rw.graph();
  const Node& argmax = g.node(i);
  if (argmax.op != Op::Argmax) return -1;
  const Value logits = argmax.inputs[0];
  const Node* mm = producer_if(g, logits, Op::Matmul);
  if (!mm || !rw.only_user_is(logits, i)) return -1;
  const Value normed = mm->inputs[0];
  const Node* norm = producer_if(g, normed, Op::RmsNorm);
  if (!norm || !rw.only_user_is(normed, logits.node) || g.type(normed).shape.rank() != 2) return -1;
  Node fused;
  fused.op = Op::NormMatmulArgmax;
  fused.inputs = {norm->inputs[0], norm->inputs[1], mm->inputs[1]};
  fused.attrs.set("eps", norm->attrs.get_float("eps"));
  fused.outputs = argmax.outputs;
  return rw.replace_with_fused(i, std::move(fused), {{Value{i, 0}, 0}},
                               {i, logits.node, normed.node});
}

}  // namespace

PassResult run_fuse_lm_head_argmax(Graph& g, const PassOptions&) {
  PassResult result;
  result.count("patterns_fused", rewrite_sweep(g, fuse_at));
  return result;
}

}  // namespace kiln::graph
