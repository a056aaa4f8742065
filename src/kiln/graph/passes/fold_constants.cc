#include "kiln/graph/passes/fold_constants.h"

#include <fmt/format.h>

#include <set>

#include "kiln/graph/passes/rewrite.h"

namespace kiln::graph {

PassResult run_fold_constants(Graph& g, const PassOptions&) {
  PassResult result;
  std::set<std::string> param_names;
  for (const Node& n : g.nodes()) {
    if (n.op == Op::Param) param_names.insert(n.attrs.get_str("name"));
  }
  std::vector<int> folded_inputs;
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    if (n.is_source() || has_side_effect(n.op) || effect_input(n.op) >= 0 ||
        n.outputs.size() != 1 || n.inputs.empty()) {
      continue;
    }
    bool all_params = true;
    for (const Value& in : n.inputs) all_params &= is_plain_param(g, in);
    if (!all_params) continue;

    std::vector<std::string> args;
    for (const Value& in : n.inputs) args.push_back(g.node(in.node).attrs.get_str("name"));
    const std::string base = fmt::format("{}({})", op_name(n.op), fmt::join(args, ","));
    std::string name = base;
    for (int k = 2; param_names.count(name); ++k) name = fmt::format("{}#{}", base, k);
    param_names.insert(name);

    Node derived;
    derived.op = Op::Param;
    derived.attrs.set("name", name);
    derived.attrs.set("derive", std::string(op_name(n.op)));
    derived.attrs.set("args", args);
    for (const auto& [key, value] : n.attrs.items()) derived.attrs.set(key, value);
    derived.outputs = n.outputs;
    derived.names = n.names;
    for (const Value& in : n.inputs) folded_inputs.push_back(in.node);
    g.node(i) = std::move(derived);  // same position, so every use still reads it
    result.count("ops_folded");
  }
  result.count("nodes_removed", remove_unused(g, folded_inputs));
  return result;
}

}  // namespace kiln::graph
