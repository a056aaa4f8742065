// "Several streams in one graph": groups the nodes into dependency levels so that the nodes
// of one level, which never depend on each other, can run at the same time on disjoint worker
// groups, with one barrier per level instead of one per op.
//
// A node's level is 1 + the highest level among the nodes it depends on (sources are level 0
// and are not scheduled). Dependencies are the data inputs plus the effect order: a mutating
// op comes after every reader of the state token it consumes (the readers must see the state
// before the write). The token chain itself is a data dependency, so writes stay in order.
#pragma once
#include <string>
#include <vector>

#include "kiln/graph/ir.h"

namespace kiln::graph {

struct Schedule {
  std::vector<std::vector<int>> levels;  // node indices per level (level 1 first), in graph order
  std::vector<int> level_of;             // per node; 0 for sources
  int ops = 0;                           // scheduled (non-source) nodes
  // Barriers per step when every op ends with one, and when every level does.
  int barriers_per_op() const { return ops; }
  int barriers_per_level() const { return static_cast<int>(levels.size()); }
  int max_width() const;
  std::string describe(const Graph& graph) const;
};

Schedule schedule_levels(const Graph& graph);

// A contiguous range of worker threads.
struct WorkerGroup {
  int first = 0;
  int count = 0;
};

// Splits `threads` workers among the nodes of one level with these costs (e.g. bytes read or
// FLOPs). With at least as many threads as nodes, each node gets a disjoint group sized in
// proportion to its cost (at least one thread); with fewer, each node gets one thread, chosen
// so the most loaded thread carries as little as possible (nodes sharing a thread run one
// after the other).
std::vector<WorkerGroup> split_workers(const std::vector<double>& costs, int threads);

}  // namespace kiln::graph
