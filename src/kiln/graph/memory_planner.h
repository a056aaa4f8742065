// Places every intermediate value of a graph in one arena, reusing memory between values that
// are never live at the same time (docs/architecture.md, Terms: "memory reuse").
//
// The node order is the execution order. A value is live from the node that defines it to its
// last use (inclusive; an unused output lives during its own node). Outputs marked in place by
// passes/inplace ({inplace=1}: output 0 reuses input 0) share their input's slot, which then
// lives from the first definition to the last use of any member. Slots are placed by greedy
// best-fit, largest first: each goes into the smallest gap between slots whose lifetimes
// overlap it, or above them all. Sizes are rounded up to the alignment (64 bytes).
//
// Never planned: params, state and inputs (their memory is not the arena's), graph outputs
// (each gets its own buffer, so it survives the step), and effect tokens (no storage).
// Views (reshape) share their input's slot like in-place outputs: they are the same bytes.
#pragma once
#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kiln/graph/ir.h"

namespace kiln::graph {

using ByteSizeFn = std::function<size_t(const ValueType&)>;
// Bytes of a dense tensor of this type (dtype_bytes of the element count).
size_t dense_byte_size(const ValueType& type);

struct PlannedBuffer {
  Value value;
  size_t offset = 0;  // in the arena, a multiple of the alignment
  size_t size = 0;    // the value's bytes, rounded up to the alignment
  int first = 0;      // defining node
  int last = 0;       // last node reading it (its slot may live longer, see `slot`)
  int slot = 0;       // values sharing a slot (in-place aliases) share one offset
};

struct MemoryPlan {
  std::vector<PlannedBuffer> buffers;  // in order of definition
  size_t arena_bytes = 0;              // high-water mark of the arena
  size_t planned_bytes = 0;            // sum of planned buffer sizes (aliases counted each)
  size_t alignment = 64;
  // planned_bytes / arena_bytes: how many times the arena's bytes are reused (1: no reuse).
  double reuse_ratio() const {
    return arena_bytes ? double(planned_bytes) / double(arena_bytes) : 1.0;
  }
  // The buffer of v, or nullptr when v is not planned (source, graph output, token).
  const PlannedBuffer* find(Value v) const;
  // One line per buffer plus totals, for `kiln graph --memory`.
  std::string describe() const;

  std::vector<std::vector<int>> index;  // index[node][output] -> buffers position, -1 if none
};

// `time` (optional, one entry per node): when nodes run, if not in node order. Plans that run
// the nodes of a schedule level concurrently pass each node's level, so that values whose
// level intervals intersect never share bytes even when their node intervals do not.
MemoryPlan plan_memory(const Graph& graph, const ByteSizeFn& byte_size = dense_byte_size,
                       size_t alignment = 64, const std::vector<int>* time = nullptr);

}  // namespace kiln::graph
