#include "kiln/graph/passes/fuse_matmul_add.h"

#include "kiln/graph/passes/rewrite.h"

namespace kiln::graph {
namespace {

bool fuse_one(Graph& g, PassResult& result) {
  const UseMap uses(g);
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& add = g.node(i);
    if (add.op != Op::Add || g.type(add.inputs[0]) != g.type(add.inputs[1]))
      continue;  // bias: refuse
    for (int mm_slot : {0, 1}) {
      const Value y = add.inputs[mm_slot];
      const Node* mm = producer_if(g, y, Op::Matmul);
      if (!mm || !uses.only_user_is(y, i)) continue;
      Node fused;
      fused.op = Op::MatmulAdd;
      fused.inputs = {mm->inputs[0], mm->inputs[1], add.inputs[1 - mm_slot]};
      fused.outputs = add.outputs;
      if (replace_with_fused(g, i, std::move(fused), {{Value{i, 0}, 0}}, {i, y.node})) {
        result.count("patterns_fused");
        return true;
      }
    }
  }
  return false;
}

}  // namespace

PassResult run_fuse_matmul_add(Graph& g, const PassOptions&) {
  PassResult result;
  while (fuse_one(g, result)) {
  }
  return result;
}

}  // namespace kiln::graph
