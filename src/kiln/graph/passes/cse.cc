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
  key += fmt::format(" {} :", attrs_to_string(n.attrs));
  for (const ValueType& t : n.outputs) key.append(" ").append(type_to_string(t));
  return key;
}

}  // namespace

PassResult run_cse(Graph& g, const PassOptions&) {
  PassResult result;
  std::unordered_map<std::string, int> first;
  // merged_into[i]: the earlier node whose values node i's are (-1: none). Uses are redirected
  // as the sweep reaches them rather than by a walk of the whole graph per duplicate.
  std::vector<int> merged_into(g.num_nodes(), -1);
  auto redirect = [&](Value& v) {
    if (merged_into[v.node] >= 0) v.node = merged_into[v.node];
  };
  std::vector<bool> dead(g.num_nodes(), false);
  graph_nodes_walked() += g.num_nodes();
  for (int i = 0; i < g.num_nodes(); ++i) {
    Node& n = g.node(i);
    for (Value& in : n.inputs) redirect(in);
    // A collective is a meeting of all ranks: two equal ones are still two meetings.
    if (has_side_effect(n.op) || is_collective(n.op)) continue;
    // Inputs of earlier duplicates were already redirected, so equal keys mean equal values.
    auto [it, inserted] = first.emplace(node_key(g, n), i);
    if (inserted) continue;
    merged_into[i] = it->second;
    dead[i] = true;
    result.count("nodes_merged");
  }
  for (Value& out : g.outputs()) redirect(out);
  if (result.changed) g.remove_nodes(dead);
  return result;
}

}  // namespace kiln::graph
