// Helpers shared by the passes: who uses each value, and replacing a matched pattern with one
// fused node in place while keeping the graph topologically ordered and the effect order intact.
#pragma once
#include <cstdint>
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

// Removes the listed nodes when unused and free of side effects, repeating as removals free
// others in the list. Returns how many were removed.
int remove_unused(Graph& g, std::vector<int> candidates);

// Rewrites a graph in place under stable node ids, so a match costs work near the match
// rather than a walk of the whole graph: new nodes are appended (and linked into the order
// where they belong), removed ones become tombstones, the users of every value are kept up to
// date, and finish() renumbers once. While it lives, read nodes through it (graph() indices
// are its ids; a tombstone is still there but no longer in the order).
class Rewriter {
 public:
  explicit Rewriter(Graph& g);
  Rewriter(const Rewriter&) = delete;
  Rewriter& operator=(const Rewriter&) = delete;

  const Graph& graph() const { return g_; }
  const Node& node(int id) const { return g_.node(id); }
  const ValueType& type(Value v) const { return g_.type(v); }
  bool alive(int id) const { return !dead_[id]; }

  const std::vector<Use>& users(Value v) const { return users_[v.node][v.index]; }
  bool is_output(Value v) const;
  // Exactly one use, by node `node` (so the value dies there), and not a graph output.
  bool only_user_is(Value v, int node) const;

  // The order: first() and next() walk the live nodes (-1 past the end).
  int first() const { return head_; }
  int next(int id) const { return next_[id]; }
  bool precedes(int a, int b) const { return key_[a] < key_[b]; }

  // Inserts `node` (output types given, inputs before `anchor`) just before `anchor`.
  int insert_before(int anchor, Node node);

  // Replaces a matched pattern by `fused`, placed just before node `anchor`: every use of
  // replaced[i].first now reads output replaced[i].second of the fused node, the fused output
  // takes the old value's name, and the nodes listed in `pattern` are removed when nothing
  // uses them any more (side-effecting ones included: the fused node performs their effect).
  // When that order breaks a dependence (a user of a replaced value ran before the anchor, an
  // input of the fused node is defined after it), the nodes between the first and the last
  // node involved are re-sorted exactly as Graph::sort_topologically would (ready nodes in
  // their current order). Returns the fused node's id, or -1, leaving everything untouched,
  // when the result would need a cycle (e.g. a reader of the state would have to run both
  // before and after the fused write).
  int replace_with_fused(int anchor, Node fused, const std::vector<std::pair<Value, int>>& replaced,
                         const std::vector<int>& pattern);
  // Where a sweep should look again after the last replace_with_fused: the first node whose
  // place changed (the start of the re-sorted span, or the fused node).
  int resume_point() const { return resume_; }

  // Writes the order back into the graph: drops tombstones and renumbers (once).
  void finish();

 private:
  void link_before(int id, int anchor);
  void unlink(int id);
  void relabel();
  void add_use(Value v, Use u) { users_[v.node][v.index].push_back(u); }
  void drop_use(Value v, Use u);
  int grow(Node node);  // appends a node and its bookkeeping; returns its id

  Graph& g_;
  std::vector<std::vector<std::vector<Use>>> users_;
  std::vector<bool> dead_;
  std::vector<int> prev_, next_;
  std::vector<int64_t> key_;  // increasing along the order
  int head_ = -1, tail_ = -1;
  int resume_ = -1;
  bool changed_ = false;
};

// Runs `fuse_at` (returns the fused node's id, or -1 when node `id` anchors no match) over the
// graph in one sweep in order, going on after a rewrite from the first node whose place
// changed: nodes before it saw no change, so a second look could find nothing new. Returns the
// number of rewrites. Work is the graph's size plus what each rewrite touches near its match.
int rewrite_sweep(Graph& g, int (*fuse_at)(Rewriter& rw, int id));

}  // namespace kiln::graph
