#include "kiln/graph/passes/fuse_add_rms_norm.h"

#include "kiln/graph/passes/rewrite.h"

namespace kiln::graph {
namespace {

// Rewrites the match anchored at norm node `i`; returns the fused node's id, or -1.
int fuse_at(Rewriter& rw, int i) {
  const Graph& g = rw.graph();
  const Node& norm = g.node(i);
  if (norm.op != Op::RmsNorm) return -1;
  const Value sum = norm.inputs[0];
  const Node* add = producer_if(g, sum, Op::Add);
  if (!add || g.type(add->inputs[0]) != g.type(add->inputs[1])) return -1;  // bias add: refuse
  Node fused;
  fused.op = Op::AddRmsNorm;
  fused.inputs = {add->inputs[0], add->inputs[1], norm.inputs[1]};
  fused.attrs.set("eps", norm.attrs.get_float("eps"));
  fused.outputs = {g.type(sum), norm.outputs[0]};
  return rw.replace_with_fused(i, std::move(fused), {{sum, 0}, {Value{i, 0}, 1}}, {i, sum.node});
}

}  // namespace

PassResult run_fuse_add_rms_norm(Graph& g, const PassOptions&) {
  PassResult result;
  result.count("patterns_fused", rewrite_sweep(g, fuse_at));
  return result;
}

}  // namespace kiln::graph
