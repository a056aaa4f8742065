#include "kiln/graph/passes/inplace.h"

#include "kiln/graph/passes/rewrite.h"

namespace kiln::graph {

bool is_inplace(const Node& node) { return node.attrs.get_int("inplace", 0) != 0; }

PassResult run_inplace(Graph& g, const PassOptions&) {
  PassResult result;
  const UseMap uses(g);
  int64_t aliased = 0;
  for (int i = 0; i < g.num_nodes(); ++i) {
    Node& n = g.node(i);
    const bool was = is_inplace(n);
    n.attrs.erase("inplace");
    bool ok = op_info(n.op).inplace_capable && !n.inputs.empty() && n.outputs.size() == 1;
    if (ok) {
      const Value in = n.inputs[0];
      const ValueType& in_type = g.type(in);
      const ValueType& out_type = n.outputs[0];
      ok = !g.node(in.node).is_source() && uses.only_user_is(in, i) &&
           !uses.is_output(Value{i, 0}) && in_type.dtype == out_type.dtype &&
           in_type.dtype != DType::Token &&
           dtype_bytes(in_type.dtype, in_type.shape.numel()) ==
               dtype_bytes(out_type.dtype, out_type.shape.numel());
    }
    if (ok) {
      n.attrs.set("inplace", int64_t{1});
      ++aliased;
    }
    if (ok != was) result.changed = true;  // only a different annotation is a change
  }
  result.counters.emplace_back("outputs_aliased", aliased);
  return result;
}

}  // namespace kiln::graph
