#include "kiln/graph/memory_planner.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "kiln/base/error.h"
#include "kiln/graph/lowering.h"
#include "kiln/graph/passes/inplace.h"

namespace kiln::graph {
namespace {

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

struct Slot {
  size_t size = 0;
  int first = 0;
  int last = 0;
  size_t offset = 0;
  bool placed = false;
};

bool overlaps(const Slot& a, const Slot& b) { return a.first <= b.last && b.first <= a.last; }

}  // namespace

size_t dense_byte_size(const ValueType& type) {
  return dtype_bytes(type.dtype, type.shape.numel());
}

const PlannedBuffer* MemoryPlan::find(Value v) const {
  if (v.node < 0 || v.node >= static_cast<int>(index.size())) return nullptr;
  const auto& outs = index[v.node];
  if (v.index < 0 || v.index >= static_cast<int>(outs.size()) || outs[v.index] < 0) return nullptr;
  return &buffers[outs[v.index]];
}

std::string MemoryPlan::describe() const {
  std::string out;
  for (const PlannedBuffer& b : buffers) {
    out += fmt::format("%{}:{}  offset {:>10}  size {:>10}  live [{}, {}]  slot {}\n", b.value.node,
                       b.value.index, b.offset, b.size, b.first, b.last, b.slot);
  }
  out += fmt::format("arena {} bytes, planned {} bytes, reuse {:.2f}x\n", arena_bytes,
                     planned_bytes, reuse_ratio());
  return out;
}

MemoryPlan plan_memory(const Graph& g, const ByteSizeFn& byte_size, size_t alignment,
                       const std::vector<int>* time) {
  KILN_CHECK(alignment > 0 && (alignment & (alignment - 1)) == 0,
             "alignment {} is not a power of two", alignment);
  MemoryPlan plan;
  plan.alignment = alignment;
  const int n = g.num_nodes();
  plan.index.resize(n);

  std::vector<std::vector<bool>> graph_output(n);
  for (int i = 0; i < n; ++i) graph_output[i].assign(g.node(i).outputs.size(), false);
  for (const Value& v : g.outputs()) graph_output[v.node][v.index] = true;

  // Which values the arena holds, and their lifetimes.
  for (int i = 0; i < n; ++i) {
    const Node& node = g.node(i);
    plan.index[i].assign(node.outputs.size(), -1);
    if (node.is_source()) continue;
    for (int k = 0; k < static_cast<int>(node.outputs.size()); ++k) {
      const ValueType& t = node.outputs[k];
      if (t.dtype == DType::Token || graph_output[i][k]) continue;
      plan.index[i][k] = static_cast<int>(plan.buffers.size());
      PlannedBuffer b;
      b.value = Value{i, k};
      b.size = round_up(std::max<size_t>(byte_size(t), 1), alignment);
      b.first = b.last = time ? (*time)[i] : i;
      plan.buffers.push_back(b);
    }
  }
  for (int i = 0; i < n; ++i) {
    for (const Value& in : g.node(i).inputs) {
      const int b = plan.index[in.node][in.index];
      if (b >= 0) plan.buffers[b].last = std::max(plan.buffers[b].last, time ? (*time)[i] : i);
    }
  }

  // Slots: one per buffer, except in-place outputs join their input's slot.
  std::vector<int> slot_of(plan.buffers.size());
  std::vector<Slot> slots;
  for (size_t b = 0; b < plan.buffers.size(); ++b) {
    PlannedBuffer& buf = plan.buffers[b];
    const Node& node = g.node(buf.value.node);
    int joined = -1;
    if (buf.value.index == 0 && (is_inplace(node) || output_is_view(node)) &&
        !node.inputs.empty()) {
      const int in_buf = plan.index[node.inputs[0].node][node.inputs[0].index];
      // Only a planned input whose bytes suffice can be shared; otherwise plan separately.
      if (in_buf >= 0 && plan.buffers[in_buf].size >= buf.size) joined = slot_of[in_buf];
    }
    if (joined < 0) {
      joined = static_cast<int>(slots.size());
      slots.push_back(Slot{buf.size, buf.first, buf.last});
    }
    Slot& s = slots[joined];
    s.size = std::max(s.size, buf.size);
    s.first = std::min(s.first, buf.first);
    s.last = std::max(s.last, buf.last);
    slot_of[b] = joined;
    buf.slot = joined;
    plan.planned_bytes += buf.size;
  }

  // Greedy best-fit, largest slots first (ties: earlier first, then slot order, for determinism).
  std::vector<int> order(slots.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    if (slots[a].size != slots[b].size) return slots[a].size > slots[b].size;
    if (slots[a].first != slots[b].first) return slots[a].first < slots[b].first;
    return a < b;
  });
  std::vector<int> placed;
  for (int s : order) {
    Slot& slot = slots[s];
    std::vector<std::pair<size_t, size_t>> busy;  // [offset, end) of overlapping placed slots
    for (int p : placed) {
      if (overlaps(slots[p], slot))
        busy.emplace_back(slots[p].offset, slots[p].offset + slots[p].size);
    }
    std::sort(busy.begin(), busy.end());
    size_t best = SIZE_MAX, best_gap = SIZE_MAX, cursor = 0;
    for (const auto& [begin, end] : busy) {
      if (begin > cursor && begin - cursor >= slot.size && begin - cursor < best_gap) {
        best = cursor;
        best_gap = begin - cursor;
      }
      cursor = std::max(cursor, end);
    }
    slot.offset = best != SIZE_MAX ? best : cursor;  // else above everything live meanwhile
    slot.placed = true;
    placed.push_back(s);
    plan.arena_bytes = std::max(plan.arena_bytes, slot.offset + slot.size);
  }
  for (PlannedBuffer& b : plan.buffers) b.offset = slots[b.slot].offset;
  return plan;
}

}  // namespace kiln::graph
