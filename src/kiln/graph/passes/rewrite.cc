#include "kiln/graph/passes/rewrite.h"

#include <algorithm>

#include "kiln/base/error.h"

namespace kiln::graph {

UseMap::UseMap(const Graph& g) : users_(g.num_nodes()) {
  for (int i = 0; i < g.num_nodes(); ++i) users_[i].resize(g.node(i).outputs.size());
  for (int i = 0; i < g.num_nodes(); ++i) {
    const auto& inputs = g.node(i).inputs;
    for (int s = 0; s < static_cast<int>(inputs.size()); ++s)
      users_[inputs[s].node][inputs[s].index].push_back({i, s});
  }
  for (int k = 0; k < static_cast<int>(g.outputs().size()); ++k) {
    const Value v = g.outputs()[k];
    users_[v.node][v.index].push_back({-1, k});
  }
}

bool UseMap::is_output(Value v) const {
  const auto& u = users(v);
  return std::any_of(u.begin(), u.end(), [](const Use& x) { return x.node < 0; });
}

bool UseMap::only_user_is(Value v, int node) const {
  const auto& u = users(v);
  return u.size() == 1 && u[0].node == node;
}

const Node* producer_if(const Graph& g, Value v, Op op) {
  const Node& n = g.node(v.node);
  return n.op == op ? &n : nullptr;
}

bool is_plain_param(const Graph& g, Value v) {
  const Node& n = g.node(v.node);
  return n.op == Op::Param && !n.attrs.has("concat");
}

int remove_unused(Graph& g, std::vector<int> candidates, bool subsumed) {
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  std::vector<bool> dead(g.num_nodes(), false);
  const auto uses = g.use_counts();
  std::vector<std::vector<int>> live_uses = uses;
  // Walk from the last candidate back: removing a node frees its inputs' uses, which can make
  // an earlier candidate dead too.
  for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
    const int i = *it;
    const Node& n = g.node(i);
    if (has_side_effect(n.op) && !subsumed) continue;
    const bool unused =
        std::all_of(live_uses[i].begin(), live_uses[i].end(), [](int c) { return c == 0; });
    if (!unused) continue;
    dead[i] = true;
    for (const Value& in : n.inputs) --live_uses[in.node][in.index];
  }
  const int removed = static_cast<int>(std::count(dead.begin(), dead.end(), true));
  if (removed) g.remove_nodes(dead);
  return removed;
}

bool replace_with_fused(Graph& g, int anchor, Node fused,
                        const std::vector<std::pair<Value, int>>& replaced,
                        const std::vector<int>& pattern) {
  Graph trial = g;
  auto shifted = [&](Value v) { return Value{v.node >= anchor ? v.node + 1 : v.node, v.index}; };
  fused.names.resize(fused.outputs.size());
  for (const auto& [old, k] : replaced) {
    const std::string_view name = g.value_name(old);
    if (!name.empty() && fused.names[k].empty()) fused.names[k] = std::string(name);
  }
  const Value f = trial.insert_node(anchor, std::move(fused));
  for (const auto& [old, k] : replaced) trial.replace_all_uses(shifted(old), Value{f.node, k});
  std::vector<int> dead_candidates;
  for (int p : pattern) dead_candidates.push_back(p >= anchor ? p + 1 : p);
  remove_unused(trial, dead_candidates, /*subsumed=*/true);
  try {
    trial.sort_topologically();
  } catch (const Error&) {
    return false;
  }
  g = std::move(trial);
  return true;
}

}  // namespace kiln::graph
