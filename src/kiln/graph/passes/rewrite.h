// Helpers shared by the passes: who uses each value, and replacing a matched pattern with one
// fused node while keeping the graph topologically ordered and the effect order intact.
#pragma once
#include <utility>
#include <vector>

#include "kiln/graph/ir.h"

namespace kiln::graph {

struct Use {
  int node = -1;  // -1: a graph output
  int slot = 0;
};

// Users of every value of a graph, as of construction (rebuild after rewriting).
class UseMap {
 public:
  explicit UseMap(const Graph& g);
  const std::vector<Use>& users(Value v) const { return users_[v.node][v.index]; }
  int count(Value v) const { return static_cast<int>(users(v).size()); }
  bool is_output(Value v) const;
  // Exactly one use, by node `node` (so the value dies there), and not a graph output.
  bool only_user_is(Value v, int node) const;

 private:
  std::vector<std::vector<std::vector<Use>>> users_;
};

// The producer of v when it is op `op`, else nullptr.
const Node* producer_if(const Graph& g, Value v, Op op);
// True for a plain weight: a param with no recipe (not derived, not concatenated).
bool is_plain_param(const Graph& g, Value v);

// Replaces a matched pattern by `fused`, placed where node `anchor` was: every use of
// replaced[i].first now reads output replaced[i].second of the fused node, the fused output takes
// the old value's name, and the pattern nodes listed in `pattern` are removed when nothing uses
// them any more (side-effecting ones included: the fused node performs their effect).
// Returns false and leaves the graph untouched when the result would need a
// cycle (e.g. a reader of the state would have to run both before and after the fused write).
bool replace_with_fused(Graph& g, int anchor, Node fused,
                        const std::vector<std::pair<Value, int>>& replaced,
                        const std::vector<int>& pattern);

// Removes the listed nodes when unused and free of side effects, repeating as removals free
// others in the list. Returns how many were removed. `subsumed`: the listed nodes' effects are
// now performed by a fused node, so unused side-effecting ones go too.
int remove_unused(Graph& g, std::vector<int> candidates, bool subsumed = false);

}  // namespace kiln::graph
