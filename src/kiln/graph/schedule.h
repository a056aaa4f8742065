// Execution levels ("several streams in one graph"): a node's level is one more than the
// highest level among its inputs' producers, so the nodes of a level are independent and may
// run concurrently with a single barrier after the level instead of one per node. Mutating
// ops are additionally ordered after every earlier reader of the state they mutate.
#pragma once
#include <vector>

#include "kiln/graph/ir.h"

namespace kiln::graph {

// Levels of the non-source nodes, each in ascending node order.
std::vector<std::vector<int>> schedule_levels(const Graph& graph);
// Level of every node (sources: -1).
std::vector<int> node_levels(const Graph& graph);

}  // namespace kiln::graph
