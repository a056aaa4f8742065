#include "kiln/graph/passes/fuse_matmul_add.h"

#include "kiln/graph/passes/rewrite.h"

namespace kiln::graph {
namespace {

// Rewrites the match anchored at add node `i`; returns the fused node's id, or -1.
int fuse_at(Rewriter& rw, int i) {
  const Graph& g = rw.graph();
  if (g.node(i).op != Op::Add || g.type(g.node(i).inputs[0]) != g.type(g.node(i).inputs[1]))
    return -1;  // bias: refuse
  for (int mm_slot : {0, 1}) {
    const Node& add = g.node(i);
    const Value y = add.inputs[mm_slot];
    const Node* mm = producer_if(g, y, Op::Matmul);
    if (!mm || !rw.only_user_is(y, i)) continue;
    Node fused;
    fused.op = Op::MatmulAdd;
    fused.inputs = {mm->inputs[0], mm->inputs[1], add.inputs[1 - mm_slot]};
    fused.outputs = add.outputs;
    const int id = rw.replace_with_fused(i, std::move(fused), {{Value{i, 0}, 0}}, {i, y.node});
    if (id >= 0) return id;
  }
  return -1;
}

}  // namespace

PassResult run_fuse_matmul_add(Graph& g, const PassOptions&) {
  PassResult result;
  result.count("patterns_fused", rewrite_sweep(g, fuse_at));
  return result;
}

}  // namespace kiln::graph
