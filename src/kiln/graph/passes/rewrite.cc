#include "kiln/graph/passes/rewrite.h"

#include <algorithm>
#include <functional>
#include <iterator>
#include <map>
#include <queue>
#include <unordered_map>

#include "kiln/base/error.h"

namespace kiln::graph {
namespace {

// Spacing of the order keys: room for this many nodes inserted between two neighbours before
// the keys are spread out again.
constexpr int64_t kKeyStep = int64_t{1} << 20;

bool reads_state_or_token(const Graph& g, const std::vector<ValueType>& fused_outputs, int fused,
                          Value in) {
  if (in.node == fused) return fused_outputs[in.index].dtype == DType::Token;
  return g.type(in).dtype == DType::Token || g.node(in.node).op == Op::State;
}

}  // namespace

UseMap::UseMap(const Graph& g) : users_(g.num_nodes()) {
  graph_nodes_walked() += g.num_nodes();
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

int remove_unused(Graph& g, std::vector<int> candidates) {
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  std::vector<bool> dead(g.num_nodes(), false);
  std::vector<std::vector<int>> live_uses = g.use_counts();
  // Walk from the last candidate back: removing a node frees its inputs' uses, which can make
  // an earlier candidate dead too.
  for (auto it = candidates.rbegin(); it != candidates.rend(); ++it) {
    const int i = *it;
    const Node& n = g.node(i);
    if (has_side_effect(n.op)) continue;
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

// ---- Rewriter ----

Rewriter::Rewriter(Graph& g) : g_(g) {
  const int n = g.num_nodes();
  graph_nodes_walked() += n;
  users_.resize(n);
  for (int i = 0; i < n; ++i) users_[i].resize(g.node(i).outputs.size());
  for (int i = 0; i < n; ++i) {
    const auto& inputs = g.node(i).inputs;
    for (int s = 0; s < static_cast<int>(inputs.size()); ++s) add_use(inputs[s], {i, s});
  }
  for (int k = 0; k < static_cast<int>(g.outputs().size()); ++k) add_use(g.outputs()[k], {-1, k});
  dead_.assign(n, false);
  prev_.resize(n);
  next_.resize(n);
  key_.resize(n);
  for (int i = 0; i < n; ++i) {
    prev_[i] = i - 1;
    next_[i] = i + 1 < n ? i + 1 : -1;
    key_[i] = (i + 1) * kKeyStep;
  }
  head_ = n > 0 ? 0 : -1;
  tail_ = n - 1;
}

bool Rewriter::is_output(Value v) const {
  const auto& u = users(v);
  return std::any_of(u.begin(), u.end(), [](const Use& x) { return x.node < 0; });
}

bool Rewriter::only_user_is(Value v, int node) const {
  const auto& u = users(v);
  return u.size() == 1 && u[0].node == node;
}

void Rewriter::drop_use(Value v, Use u) {
  // Stable erase: the users of a value stay in the order they were added.
  auto& list = users_[v.node][v.index];
  auto it = std::find_if(list.begin(), list.end(),
                         [&](const Use& x) { return x.node == u.node && x.slot == u.slot; });
  KILN_CHECK(it != list.end(), "rewrite: node {} slot {} is not a user of %{}:{}", u.node, u.slot,
             v.node, v.index);
  list.erase(it);
}

int Rewriter::grow(Node node) {
  const int id = g_.num_nodes();
  const size_t outputs = node.outputs.size();
  g_.add_node(std::move(node));
  users_.emplace_back(outputs);
  dead_.push_back(false);
  prev_.push_back(-1);
  next_.push_back(-1);
  key_.push_back(0);
  return id;
}

void Rewriter::relabel() {
  int64_t k = 0;
  for (int id = head_; id >= 0; id = next_[id]) {
    key_[id] = (k += kKeyStep);
    ++graph_nodes_walked();
  }
}

void Rewriter::link_before(int id, int anchor) {
  const int before = prev_[anchor];
  const int64_t low = before >= 0 ? key_[before] : 0;
  if (key_[anchor] - low < 2) {
    relabel();
    link_before(id, anchor);
    return;
  }
  key_[id] = low + (key_[anchor] - low) / 2;
  prev_[id] = before;
  next_[id] = anchor;
  prev_[anchor] = id;
  if (before >= 0) {
    next_[before] = id;
  } else {
    head_ = id;
  }
}

void Rewriter::unlink(int id) {
  const int p = prev_[id];
  const int n = next_[id];
  if (p >= 0) {
    next_[p] = n;
  } else {
    head_ = n;
  }
  if (n >= 0) {
    prev_[n] = p;
  } else {
    tail_ = p;
  }
  prev_[id] = next_[id] = -1;
}

int Rewriter::insert_before(int anchor, Node node) {
  KILN_CHECK(alive(anchor), "insert_before: node {} was removed", anchor);
  KILN_CHECK(!node.outputs.empty(), "insert_before: {} needs its output types", op_name(node.op));
  const int id = grow(std::move(node));
  link_before(id, anchor);
  const auto& inputs = g_.node(id).inputs;
  for (int s = 0; s < static_cast<int>(inputs.size()); ++s) add_use(inputs[s], {id, s});
  changed_ = true;
  return id;
}

int Rewriter::replace_with_fused(int anchor, Node fused,
                                 const std::vector<std::pair<Value, int>>& replaced,
                                 const std::vector<int>& pattern) {
  KILN_CHECK(alive(anchor), "replace_with_fused: anchor {} was removed", anchor);
  const int f = g_.num_nodes();  // the id the fused node will get
  auto redirect = [&](Value v) {
    for (const auto& [old, k] : replaced) {
      if (v == old) return Value{f, k};
    }
    return v;
  };
  // A fused node reading a value it replaces would read itself.
  for (const Value& in : fused.inputs) {
    if (redirect(in).node == f) return -1;
  }
  fused.names.resize(fused.outputs.size());
  for (const auto& [old, k] : replaced) {
    const std::string_view name = g_.value_name(old);
    if (!name.empty() && fused.names[k].empty()) fused.names[k] = std::string(name);
  }

  // Which pattern nodes die: walking from the last back, a node dies when nothing reads its
  // outputs once the replaced values are read from the fused node instead (the fused node's
  // own inputs count as reads); a dying node frees the values it read.
  std::vector<int> candidates;
  std::copy_if(pattern.begin(), pattern.end(), std::back_inserter(candidates),
               [&](int p) { return alive(p); });
  std::sort(candidates.begin(), candidates.end(), [&](int a, int b) { return key_[a] > key_[b]; });
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());
  std::vector<std::pair<Value, int>> live;  // uses left of the candidates' outputs
  for (int p : candidates) {
    for (int o = 0; o < static_cast<int>(g_.node(p).outputs.size()); ++o) {
      const Value v{p, o};
      int n = redirect(v) == v ? static_cast<int>(users(v).size()) : 0;
      n += static_cast<int>(std::count(fused.inputs.begin(), fused.inputs.end(), v));
      live.emplace_back(v, n);
    }
  }
  auto live_of = [&](Value v) -> int* {
    for (auto& [x, n] : live) {
      if (x == v) return &n;
    }
    return nullptr;
  };
  std::vector<int> dying;
  for (int p : candidates) {
    bool unused = true;
    for (int o = 0; o < static_cast<int>(g_.node(p).outputs.size()); ++o)
      unused = unused && *live_of(Value{p, o}) == 0;
    if (!unused) continue;
    dying.push_back(p);
    for (const Value& in : g_.node(p).inputs) {
      if (int* n = live_of(in); n && redirect(in) == in) --*n;
    }
  }
  auto is_dying = [&](int id) { return std::find(dying.begin(), dying.end(), id) != dying.end(); };

  // Dependences the new place breaks. The fused node sits just before the anchor, so a node
  // is before it when its key is below the anchor's. Only edges at the fused node can be
  // broken (the rest of the order was valid and is unchanged), so the span from the first to
  // the last node such an edge reaches is all that needs re-sorting.
  const int64_t at = key_[anchor];
  const bool mutates = has_side_effect(fused.op);
  int lo = -1;  // first node of the span when it starts before the fused node
  int hi = -1;  // last node of the span when it ends after it
  auto widen_before = [&](int id) {
    if (!is_dying(id) && key_[id] < at && (lo < 0 || key_[id] < key_[lo])) lo = id;
  };
  auto widen_after = [&](int id) {
    if (!is_dying(id) && key_[id] >= at && (hi < 0 || key_[id] > key_[hi])) hi = id;
  };
  for (const Value& in : fused.inputs) {
    widen_after(in.node);  // an input defined after the fused node
    if (!reads_state_or_token(g_, fused.outputs, f, in)) continue;
    for (const Use& u : users(in)) {
      if (u.node < 0) continue;
      const bool other_mutates = has_side_effect(g_.node(u.node).op);
      // Readers of the state this node overwrites must run first; a pure fused node must run
      // before the op that overwrites what it reads.
      if (mutates && !other_mutates) widen_after(u.node);
      if (!mutates && other_mutates) widen_before(u.node);
    }
  }
  for (const auto& [old, k] : replaced) {
    for (const Use& u : users(old)) {
      if (u.node >= 0) widen_before(u.node);  // a user of a replaced value ran before the anchor
    }
  }

  std::vector<int> order;  // the span in its new order, when it needs re-sorting
  if (lo >= 0 || hi >= 0) {
    // The span in its current order, with the fused node (id f) just before the anchor.
    std::vector<int> span;
    const int start = lo >= 0 ? lo : anchor;
    const int64_t last = hi >= 0 ? key_[hi] : at - 1;
    bool placed = false;
    for (int id = start; id >= 0 && key_[id] <= last; id = next_[id]) {
      if (!placed && key_[id] >= at) {
        span.push_back(f);
        placed = true;
      }
      if (!is_dying(id)) span.push_back(id);
    }
    if (!placed) span.push_back(f);
    graph_nodes_walked() += static_cast<int64_t>(span.size());

    // Graph::sort_topologically restricted to the span: data edges and reader -> mutator
    // edges, always emitting the ready node that comes first now.
    const int m = static_cast<int>(span.size());
    std::unordered_map<int, int> pos;
    for (int s = 0; s < m; ++s) pos[span[s]] = s;
    auto inputs_of = [&](int id) {
      std::vector<Value> in = id == f ? fused.inputs : g_.node(id).inputs;
      if (id != f) {
        for (Value& v : in) v = redirect(v);
      }
      return in;
    };
    auto op_of = [&](int id) { return id == f ? fused.op : g_.node(id).op; };
    std::vector<std::vector<int>> succ(m);
    std::vector<int> preds(m, 0);
    auto edge = [&](int from, int to) {
      succ[from].push_back(to);
      ++preds[to];
    };
    std::map<std::pair<int, int>, std::vector<int>> readers;  // value -> pure readers in the span
    std::vector<std::vector<Value>> span_inputs(m);
    for (int s = 0; s < m; ++s) {
      span_inputs[s] = inputs_of(span[s]);
      for (const Value& in : span_inputs[s]) {
        if (auto it = pos.find(in.node); it != pos.end()) edge(it->second, s);
      }
      if (!has_side_effect(op_of(span[s]))) {
        for (const Value& in : span_inputs[s]) readers[{in.node, in.index}].push_back(s);
      }
    }
    for (int s = 0; s < m; ++s) {
      if (!has_side_effect(op_of(span[s]))) continue;
      for (const Value& in : span_inputs[s]) {
        if (!reads_state_or_token(g_, fused.outputs, f, in)) continue;
        auto it = readers.find({in.node, in.index});
        if (it == readers.end()) continue;
        for (int r : it->second) {
          if (r != s) edge(r, s);
        }
      }
    }
    std::priority_queue<int, std::vector<int>, std::greater<>> ready;
    for (int s = 0; s < m; ++s) {
      if (preds[s] == 0) ready.push(s);
    }
    while (!ready.empty()) {
      const int s = ready.top();
      ready.pop();
      order.push_back(span[s]);
      for (int t : succ[s]) {
        if (--preds[t] == 0) ready.push(t);
      }
    }
    if (static_cast<int>(order.size()) != m) return -1;  // a cycle: refuse, nothing changed
  }

  // Commit.
  const int id = grow(std::move(fused));
  KILN_CHECK(id == f, "replace_with_fused: the fused node got id {}, not {}", id, f);
  link_before(id, anchor);
  const std::vector<Value> fused_inputs = g_.node(id).inputs;
  for (int s = 0; s < static_cast<int>(fused_inputs.size()); ++s) add_use(fused_inputs[s], {id, s});
  for (const auto& [old, k] : replaced) {
    const Value now{id, k};
    std::vector<Use> moved;
    moved.swap(users_[old.node][old.index]);
    graph_nodes_walked() += static_cast<int64_t>(moved.size());
    for (const Use& u : moved) {
      if (u.node < 0) {
        g_.outputs()[u.slot] = now;
      } else {
        g_.node(u.node).inputs[u.slot] = now;
      }
      add_use(now, u);
    }
  }
  for (int p : dying) {
    const auto& inputs = g_.node(p).inputs;
    for (int s = 0; s < static_cast<int>(inputs.size()); ++s) drop_use(inputs[s], {p, s});
    unlink(p);
    dead_[p] = true;
  }
  resume_ = id;
  if (!order.empty()) {
    // The span now holds exactly the nodes of `order` (dying ones unlinked, the fused one
    // linked in): relink them in the new order on the same keys.
    const int first_id = lo >= 0 ? lo : id;
    std::vector<int64_t> keys;
    keys.reserve(order.size());
    int before = prev_[first_id];
    int after = first_id;
    for (size_t s = 0; s < order.size(); ++s, after = next_[after]) keys.push_back(key_[after]);
    for (size_t s = 0; s < order.size(); ++s) {
      const int x = order[s];
      key_[x] = keys[s];
      prev_[x] = before;
      if (before >= 0) {
        next_[before] = x;
      } else {
        head_ = x;
      }
      before = x;
    }
    next_[before] = after;
    if (after >= 0) {
      prev_[after] = before;
    } else {
      tail_ = before;
    }
    resume_ = order.front();
  }
  changed_ = true;
  return id;
}

void Rewriter::finish() {
  if (!changed_) return;
  std::vector<int> order;
  order.reserve(g_.num_nodes());
  for (int id = head_; id >= 0; id = next_[id]) order.push_back(id);
  g_.keep_in_order(order);
  changed_ = false;
}

int rewrite_sweep(Graph& g, int (*fuse_at)(Rewriter& rw, int id)) {
  Rewriter rw(g);
  int fused = 0;
  for (int i = rw.first(); i >= 0;) {
    ++graph_nodes_walked();
    if (fuse_at(rw, i) >= 0) {
      ++fused;
      i = rw.resume_point();
    } else {
      i = rw.next(i);
    }
  }
  rw.finish();
  return fused;
}

}  // namespace kiln::graph
