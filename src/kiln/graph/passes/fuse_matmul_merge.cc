#include "kiln/graph/passes/fuse_matmul_merge.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <type_traits>

#include "kiln/base/error.h"
#include "kiln/graph/passes/rewrite.h"
#include "kiln/graph/step.h"

namespace kiln::graph {
namespace {

// A merged GEMM's outputs are written through Step::out (lower_gemm's matmul_split), so a
// group larger than that merges in parts of at most this many.
constexpr size_t kMaxSplits = std::extent_v<decltype(Step::out)>;

// The matmuls of every mergeable group, each in graph order, groups in the order of their
// first member; a group larger than kMaxSplits is cut into parts of at most that many (a lone
// leftover is dropped).
std::vector<std::vector<int>> find_groups(const Rewriter& rw) {
  const Graph& g = rw.graph();
  std::map<std::tuple<int, int, DType>, std::vector<int>> groups;  // (x node, x index, dtype)
  std::vector<std::tuple<int, int, DType>> order;
  for (int i = rw.first(); i >= 0; i = rw.next(i)) {
    const Node& n = g.node(i);
    if (n.op != Op::Matmul || !is_plain_param(g, n.inputs[1])) continue;
    const auto key =
        std::make_tuple(n.inputs[0].node, n.inputs[0].index, g.type(n.inputs[1]).dtype);
    auto& members = groups[key];
    if (members.empty()) order.push_back(key);
    members.push_back(i);
  }
  std::vector<std::vector<int>> parts;
  for (const auto& key : order) {
    const std::vector<int>& members = groups[key];
    for (size_t at = 0; members.size() - at >= 2; at += kMaxSplits) {
      const size_t end = std::min(members.size(), at + kMaxSplits);
      parts.emplace_back(members.begin() + static_cast<std::ptrdiff_t>(at),
                         members.begin() + static_cast<std::ptrdiff_t>(end));
      if (end == members.size()) break;
    }
  }
  return parts;
}

}  // namespace

PassResult run_fuse_matmul_merge(Graph& g, const PassOptions&) {
  PassResult result;
  Rewriter rw(g);
  // Groups found once: a merge replaces its own members (and their weights) and places its
  // nodes just before its first member, where every member's users already come later, so it
  // moves nothing else and leaves the other groups as they were found.
  for (const std::vector<int>& group : find_groups(rw)) {
    const Node& first = rw.node(group[0]);
    const Value x = first.inputs[0];
    const ValueType w0 = rw.type(first.inputs[1]);
    std::vector<std::string> names;
    std::vector<int64_t> splits;
    std::vector<int> pattern = group;
    for (int m : group) {
      const Value w = rw.node(m).inputs[1];
      names.push_back(rw.node(w.node).attrs.get_str("name"));
      splits.push_back(rw.type(w).shape[0]);
      pattern.push_back(w.node);
    }
    int64_t rows = 0;
    for (int64_t s : splits) rows += s;

    Node merged;
    merged.op = Op::Param;
    merged.attrs.set("name", fmt::format("{}", fmt::join(names, "+")));
    merged.attrs.set("concat", names);
    merged.outputs = {ValueType{w0.dtype, Shape{rows, w0.shape[1]}}};
    const int anchor = group[0];
    const Value w{rw.insert_before(anchor, std::move(merged)), 0};

    Node split;
    split.op = Op::MatmulSplit;
    split.inputs = {x, w};
    split.attrs.set("splits", splits);
    for (int64_t s : splits)
      split.outputs.push_back(ValueType{DType::F32, Shape{rw.type(x).shape[0], s}});
    std::vector<std::pair<Value, int>> replaced;
    for (int k = 0; k < static_cast<int>(group.size()); ++k) replaced.push_back({{group[k], 0}, k});
    // Every member reads x, defined before the first one, and the merged weight is placed
    // just before; nothing can form a cycle, so this cannot be refused.
    KILN_CHECK(rw.replace_with_fused(anchor, std::move(split), replaced, pattern) >= 0,
               "fuse_matmul_merge: merging {} matmuls formed a cycle", group.size());
    result.count("matmuls_merged", static_cast<int64_t>(group.size()));
    result.count("patterns_fused");
  }
  rw.finish();
  return result;
}

}  // namespace kiln::graph
