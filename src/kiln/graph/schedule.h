// "Several streams in one graph": groups the nodes into dependency levels so that the nodes
// of one level, which never depend on each other, can run at the same time on disjoint worker
// groups, with one barrier per level instead of one per op.
//
// A node's level is 1 + the highest level among the nodes it depends on (0 when it depends on
// sources only; sources are not scheduled). Dependencies are the data inputs plus the effect order:
// a mutating op comes after every reader of the state token it consumes (the readers must see the
// state before the write). The token chain itself is a data dependency, so writes stay in order.
#pragma once
#include <string>
#include <vector>

#include "kiln/graph/ir.h"

namespace kiln::graph {

// Level of every node, counting from 0 (sources: -1, they do not run).
std::vector<int> node_levels(const Graph& graph);
// The non-source nodes of each level, in ascending node order.
std::vector<std::vector<int>> schedule_levels(const Graph& graph);

// What grouping by levels buys, for `kiln graph` and logs.
struct ScheduleStats {
  int ops = 0;        // scheduled (non-source) nodes: barriers per step with one per op
  int levels = 0;     // barriers per step with one per level
  int max_width = 0;  // most nodes in one level
};
ScheduleStats schedule_stats(const std::vector<std::vector<int>>& levels);
// One line per level ("level 0: %3=matmul %4=matmul") and the barrier counts.
std::string describe_schedule(const Graph& graph, const std::vector<std::vector<int>>& levels);

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
