#include "kiln/graph/passes/fuse_add_rms_norm.h"

#include "kiln/graph/passes/rewrite.h"

namespace kiln::graph {
namespace {

// Finds and rewrites one match at or after `start`; returns the position to continue from or -1.
int fuse_one(Graph& g, int start, PassResult& result) {
  for (int i = start; i < g.num_nodes(); ++i) {
    const Node& norm = g.node(i);
    if (norm.op != Op::RmsNorm) continue;
    const Value sum = norm.inputs[0];
    const Node* add = producer_if(g, sum, Op::Add);
    if (!add || g.type(add->inputs[0]) != g.type(add->inputs[1])) continue;  // bias add: refuse
    Node fused;
    fused.op = Op::AddRmsNorm;
    fused.inputs = {add->inputs[0], add->inputs[1], norm.inputs[1]};
    fused.attrs.set("eps", norm.attrs.get_float("eps"));
    fused.outputs = {g.type(sum), norm.outputs[0]};
    if (replace_with_fused(g, i, std::move(fused), {{sum, 0}, {Value{i, 0}, 1}}, {i, sum.node})) {
      result.count("patterns_fused");
      return 0;  // positions moved; rescan (the graph is small and matches are few)
    }
  }
  return -1;
}

}  // namespace

PassResult run_fuse_add_rms_norm(Graph& g, const PassOptions&) {
  PassResult result;
  for (int start = 0; start >= 0;) start = fuse_one(g, start, result);
  return result;
}

}  // namespace kiln::graph
