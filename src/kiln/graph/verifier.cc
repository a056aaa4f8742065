// The IR's invariants, checked after building, parsing and (in debug builds) every pass.
#include <fmt/format.h>

#include "kiln/base/error.h"
#include "kiln/graph/ir.h"

namespace kiln::graph {
namespace {

std::string where(const Graph& g, int i) {
  return fmt::format("graph {}: node {} ({})", g.name(), i, op_name(g.node(i).op));
}

void verify_source(const Graph& g, int i) {
  const Node& n = g.node(i);
  KILN_CHECK(n.inputs.empty(), "{}: a source takes no inputs", where(g, i));
  KILN_CHECK(n.outputs.size() == 1, "{}: a source has exactly one output", where(g, i));
  const AttrValue* name = n.attrs.find("name");
  KILN_CHECK(
      name && std::holds_alternative<std::string>(*name) && !std::get<std::string>(*name).empty(),
      "{}: a source needs a non-empty string attribute 'name'", where(g, i));
  KILN_CHECK(n.outputs[0].dtype != DType::Token, "{}: a source cannot be an effect token",
             where(g, i));
  if (n.op == Op::Param && n.attrs.has("concat")) {
    KILN_CHECK(n.attrs.get_strs("concat").size() >= 2, "{}: concat needs at least two params",
               where(g, i));
  }
}

}  // namespace

void verify(const Graph& g) {
  const int n = g.num_nodes();
  // For effect checks: which mutating op consumes each value, and where each value was read.
  std::vector<std::vector<int>> mutator(n);
  for (int i = 0; i < n; ++i) {
    const Node& node = g.node(i);
    mutator[i].assign(node.outputs.size(), -1);
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      const Value in = node.inputs[k];
      KILN_CHECK(in.node >= 0 && in.node < i,
                 "{}: input {} reads node {}, which is not defined before it", where(g, i), k,
                 in.node);
      KILN_CHECK(in.index >= 0 && in.index < static_cast<int>(g.node(in.node).outputs.size()),
                 "{}: input {} reads output {} of node {}, which has {}", where(g, i), k, in.index,
                 in.node, g.node(in.node).outputs.size());
    }
    if (node.is_source()) {
      verify_source(g, i);
      continue;
    }
    std::vector<ValueType> in_types;
    for (const Value& in : node.inputs) in_types.push_back(g.type(in));
    std::vector<ValueType> expect;
    try {
      expect = infer_output_types(node.op, in_types, node.attrs);
    } catch (const Error& e) {
      fail("{}: {}", where(g, i), e.what());
    }
    KILN_CHECK(expect.size() == node.outputs.size(), "{}: has {} outputs, its op gives {}",
               where(g, i), node.outputs.size(), expect.size());
    for (size_t k = 0; k < expect.size(); ++k) {
      KILN_CHECK(expect[k] == node.outputs[k], "{}: output {} is declared {}{}, inferred {}{}",
                 where(g, i), k, dtype_name(node.outputs[k].dtype), node.outputs[k].shape.str(),
                 dtype_name(expect[k].dtype), expect[k].shape.str());
    }
    // Effect tokens only flow into the state input of ops that touch state.
    const int effect = effect_input(node.op);
    for (size_t k = 0; k < node.inputs.size(); ++k) {
      if (static_cast<int>(k) == effect) continue;
      KILN_CHECK(g.type(node.inputs[k]).dtype != DType::Token, "{}: input {} is an effect token",
                 where(g, i), k);
    }
    if (effect >= 0) {
      const Value kv = node.inputs[effect];
      const Node& producer = g.node(kv.node);
      KILN_CHECK(producer.op == Op::State || g.type(kv).dtype == DType::Token,
                 "{}: kv input must be a state or an effect token, got {} output", where(g, i),
                 op_name(producer.op));
    }
    if (has_side_effect(node.op)) {
      const Value kv = node.inputs[effect];
      int& other = mutator[kv.node][kv.index];
      KILN_CHECK(other < 0,
                 "{}: state token from node {} is already consumed by mutating node {}; the token "
                 "chain must be linear",
                 where(g, i), kv.node, other);
      other = i;
    }
  }
  // A reader of a token must run before the mutation that consumes it (it would otherwise see
  // state written after the point it names).
  for (int i = 0; i < n; ++i) {
    const Node& node = g.node(i);
    const int effect = effect_input(node.op);
    if (effect < 0 || has_side_effect(node.op)) continue;
    const Value kv = node.inputs[effect];
    const int m = mutator[kv.node][kv.index];
    KILN_CHECK(m < 0 || m > i,
               "{}: reads the state token of node {} after node {} has mutated that state",
               where(g, i), kv.node, m);
  }
  for (const Value& out : g.outputs()) {
    KILN_CHECK(out.node >= 0 && out.node < n && out.index >= 0 &&
                   out.index < static_cast<int>(g.node(out.node).outputs.size()),
               "graph {}: output %{}:{} does not exist", g.name(), out.node, out.index);
  }
}

}  // namespace kiln::graph
