#include "kiln/graph/passes/cse.h"

#include <fmt/format.h>

#include <unordered_map>

#include "kiln/graph/printer.h"

namespace kiln::graph {
namespace {

// Everything that makes two nodes compute the same value, as text.
std::string node_key(const Graph& g, const Node& n) {
  std::string key{op_name(n.op)};
  for (const Value& in : n.inputs) key += fmt::format(" {}:{}", in.node, in.index);
  key += " " + attrs_to_string(n.attrs) + " :";
  for (const ValueType& t : n.outputs) key += " " + type_to_string(t);
  return key;
}

}  // namespace

PassResult run_cse(Graph& g, const PassOptions&) {
  PassResult result;
  std::unordered_map<std::string, int> first;
  std::vector<bool> dead(g.num_nodes(), false);
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    if (has_side_effect(n.op)) continue;
    // Uses of earlier duplicates were already redirected, so equal keys mean equal values.
    auto [it, inserted] = first.emplace(node_key(g, n), i);
    if (inserted) continue;
    for (int k = 0; k < static_cast<int>(n.outputs.size()); ++k) {
      g.replace_all_uses(Value{i, k}, Value{it->second, k});
    }
    dead[i] = true;
    result.count("nodes_merged");
  }
  if (result.changed) g.remove_nodes(dead);
  return result;
}

}  // namespace kiln::graph
