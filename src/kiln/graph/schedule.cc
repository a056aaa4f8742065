#include "kiln/graph/schedule.h"

#include <algorithm>

namespace kiln::graph {

std::vector<int> node_levels(const Graph& g) {
  const int n = g.num_nodes();
  std::vector<int> level(n, -1);
  // The last level that read each state-carrying value (token or state): a mutation of the
  // state must come after every read of its previous contents (attention reads layer l while
  // kv_write of layer l+1 takes the same token).
  std::vector<int> last_reader(n, -1);
  for (int i = 0; i < n; ++i) {
    const Node& node = g.node(i);
    if (node.is_source()) continue;
    int lv = 0;
    for (const Value& in : node.inputs) lv = std::max(lv, level[in.node] + 1);
    if (has_side_effect(node.op)) {
      for (const Value& in : node.inputs) lv = std::max(lv, last_reader[in.node] + 1);
    }
    level[i] = lv;
    for (const Value& in : node.inputs) last_reader[in.node] = std::max(last_reader[in.node], lv);
  }
  return level;
}

std::vector<std::vector<int>> schedule_levels(const Graph& g) {
  std::vector<int> level = node_levels(g);
  int max_level = -1;
  for (int lv : level) max_level = std::max(max_level, lv);
  std::vector<std::vector<int>> levels(max_level + 1);
  for (int i = 0; i < g.num_nodes(); ++i) {
    if (level[i] >= 0) levels[level[i]].push_back(i);
  }
  return levels;
}

}  // namespace kiln::graph
