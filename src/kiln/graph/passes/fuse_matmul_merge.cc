#include "kiln/graph/passes/fuse_matmul_merge.h"

#include <fmt/format.h>

#include <map>

#include "kiln/base/error.h"
#include "kiln/graph/passes/rewrite.h"

namespace kiln::graph {
namespace {

// The matmuls of the first mergeable group, in graph order (empty when none).
std::vector<int> find_group(const Graph& g) {
  std::map<std::tuple<int, int, DType>, std::vector<int>> groups;  // (x node, x index, dtype)
  std::vector<std::tuple<int, int, DType>> order;
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    if (n.op != Op::Matmul || !is_plain_param(g, n.inputs[1])) continue;
    const auto key =
        std::make_tuple(n.inputs[0].node, n.inputs[0].index, g.type(n.inputs[1]).dtype);
    auto& members = groups[key];
    if (members.empty()) order.push_back(key);
    members.push_back(i);
  }
  for (const auto& key : order) {
    if (groups[key].size() >= 2) return groups[key];
  }
  return {};
}

}  // namespace

PassResult run_fuse_matmul_merge(Graph& g, const PassOptions&) {
  PassResult result;
  for (std::vector<int> group = find_group(g); !group.empty(); group = find_group(g)) {
    const Node& first = g.node(group[0]);
    const Value x = first.inputs[0];
    const ValueType w0 = g.type(first.inputs[1]);
    std::vector<std::string> names;
    std::vector<int64_t> splits;
    std::vector<int> weights;
    for (int m : group) {
      const Value w = g.node(m).inputs[1];
      names.push_back(g.node(w.node).attrs.get_str("name"));
      splits.push_back(g.type(w).shape[0]);
      weights.push_back(w.node);
    }
    int64_t rows = 0;
    for (int64_t s : splits) rows += s;

    Node merged;
    merged.op = Op::Param;
    merged.attrs.set("name", fmt::format("{}", fmt::join(names, "+")));
    merged.attrs.set("concat", names);
    merged.outputs = {ValueType{w0.dtype, Shape{rows, w0.shape[1]}}};
    const int anchor = group[0];
    const Value w = g.insert_node(anchor, std::move(merged));  // nodes from anchor on shift by 1

    Node split;
    split.op = Op::MatmulSplit;
    split.inputs = {x, w};
    split.attrs.set("splits", splits);
    for (int64_t s : splits)
      split.outputs.push_back(ValueType{DType::F32, Shape{g.type(x).shape[0], s}});
    std::vector<std::pair<Value, int>> replaced;
    std::vector<int> pattern;
    for (int k = 0; k < static_cast<int>(group.size()); ++k) {
      replaced.push_back({Value{group[k] + 1, 0}, k});
      pattern.push_back(group[k] + 1);
    }
    for (int wn : weights) pattern.push_back(wn >= anchor ? wn + 1 : wn);
    // Every member reads x, defined before the first one, and the merged weight is placed
    // just before; nothing can form a cycle, so this cannot be refused.
    KILN_CHECK(replace_with_fused(g, anchor + 1, std::move(split), replaced, pattern),
               "fuse_matmul_merge: merging {} matmuls formed a cycle", group.size());
    result.count("matmuls_merged", static_cast<int64_t>(group.size()));
    result.count("patterns_fused");
  }
  return result;
}

}  // namespace kiln::graph
