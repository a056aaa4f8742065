#include "kiln/graph/memory_planner.h"

#include <algorithm>
#include <map>

#include "kiln/graph/lowering.h"
#include "kiln/graph/schedule.h"

namespace kiln::graph {
namespace {

constexpr size_t kAlign = 64;

size_t aligned(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

struct Interval {
  int begin;
  int end;  // inclusive
  size_t bytes;
  std::vector<std::pair<int, int>> values;  // (node, output) sharing this buffer
};

}  // namespace

MemoryPlan plan_memory(const Graph& g) {
  const int n = g.num_nodes();
  MemoryPlan plan;
  plan.offsets.resize(n);
  for (int i = 0; i < n; ++i) plan.offsets[i].assign(g.node(i).outputs.size(), -1);

  std::vector<int> level = node_levels(g);
  std::vector<std::vector<bool>> is_output(n);
  for (int i = 0; i < n; ++i) is_output[i].assign(g.node(i).outputs.size(), false);
  for (const Value& v : g.outputs()) is_output[v.node][v.index] = true;

  // The buffer holding each value: views and tokens resolve to what they alias.
  std::vector<std::vector<int>> buffer_of(n);
  std::vector<Interval> buffers;
  auto owner = [&](Value v) -> int { return buffer_of[v.node].empty() ? -1 : buffer_of[v.node][v.index]; };
  for (int i = 0; i < n; ++i) {
    const Node& node = g.node(i);
    buffer_of[i].assign(node.outputs.size(), -1);
    if (node.is_source()) continue;
    for (size_t k = 0; k < node.outputs.size(); ++k) {
      const ValueType& t = node.outputs[k];
      if (t.dtype == DType::Token || is_output[i][k]) continue;
      if (output_is_view(node) || (k == 0 && node.attrs.get_int("inplace", 0) != 0)) {
        buffer_of[i][k] = owner(node.inputs[0]);  // shares input 0's bytes (-1 if unplanned)
        if (buffer_of[i][k] >= 0) buffers[buffer_of[i][k]].values.emplace_back(i, static_cast<int>(k));
        continue;
      }
      buffer_of[i][k] = static_cast<int>(buffers.size());
      buffers.push_back({level[i], level[i], aligned(dtype_bytes(t.dtype, t.shape.numel())), {{i, static_cast<int>(k)}}});
    }
  }
  // Extend each buffer to the last level that reads any value living in it.
  for (int i = 0; i < n; ++i) {
    for (const Value& in : g.node(i).inputs) {
      int b = owner(in);
      if (b >= 0) buffers[b].end = std::max(buffers[b].end, level[i]);
    }
  }

  // Greedy best-fit: place big buffers first; each goes to the lowest offset where it does
  // not overlap any already-placed buffer whose interval intersects its own.
  std::vector<int> order(buffers.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return buffers[a].bytes > buffers[b].bytes; });
  std::vector<int64_t> offset(buffers.size(), -1);
  std::vector<int> placed;
  for (int b : order) {
    const Interval& cur = buffers[b];
    std::vector<std::pair<int64_t, int64_t>> busy;  // [start, end) of conflicting buffers
    for (int p : placed) {
      const Interval& o = buffers[p];
      if (o.begin <= cur.end && cur.begin <= o.end) busy.emplace_back(offset[p], offset[p] + static_cast<int64_t>(o.bytes));
    }
    std::sort(busy.begin(), busy.end());
    int64_t best = -1, best_gap = INT64_MAX, cursor = 0;
    for (const auto& [s, e] : busy) {
      if (s > cursor && s - cursor >= static_cast<int64_t>(cur.bytes) && s - cursor < best_gap) {
        best = cursor;
        best_gap = s - cursor;
      }
      cursor = std::max(cursor, e);
    }
    offset[b] = best >= 0 ? best : cursor;
    placed.push_back(b);
    plan.arena_bytes = std::max(plan.arena_bytes, static_cast<size_t>(offset[b]) + cur.bytes);
    plan.planned_bytes += cur.bytes;
    for (auto [node, k] : cur.values) plan.offsets[node][k] = offset[b];
  }
  return plan;
}

}  // namespace kiln::graph
