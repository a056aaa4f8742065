// Memory planning for a plan's intermediates: liveness intervals over execution levels, then
// offsets in one arena by greedy best-fit.
//
// Time is the schedule LEVEL, not the node index: nodes of one level may run concurrently, so a
// value is live from the start of the level that defines it to the end of the level of its
// last use, and two values whose level intervals intersect never share bytes. In-place
// aliases ({inplace=1} on a node: output 0 reuses input 0's buffer) share the input's slot,
// whose interval is extended to the output's last use. Params, state, graph inputs, graph
// outputs, tokens and views (reshape) are never planned.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kiln/graph/ir.h"

namespace kiln::graph {

struct MemoryPlan {
  size_t arena_bytes = 0;    // peak: the arena this plan needs
  size_t planned_bytes = 0;  // sum of all planned buffers (what no reuse would cost)
  // Byte offset of each node output in the arena; -1 when not planned.
  std::vector<std::vector<int64_t>> offsets;
  double reuse_ratio() const { return arena_bytes ? static_cast<double>(planned_bytes) / arena_bytes : 1.0; }
};

MemoryPlan plan_memory(const Graph& graph);

}  // namespace kiln::graph
