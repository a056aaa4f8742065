#include "kiln/graph/schedule.h"

#include <gtest/gtest.h>

#include <numeric>

#include "graph/test_graphs.h"
#include "kiln/graph/parser.h"
#include "kiln/graph/passes/pipeline.h"

namespace kiln::graph {
namespace {

// No node depends (by data or effect order) on another node of its own level, and each node's
// level is exactly one above its deepest dependency.
void check_levels(const Graph& g, const std::vector<std::vector<int>>& levels) {
  const std::vector<int> level_of = node_levels(g);
  int scheduled = 0;
  for (size_t l = 0; l < levels.size(); ++l) {
    EXPECT_FALSE(levels[l].empty()) << "empty level " << l;
    for (int i : levels[l]) {
      ++scheduled;
      EXPECT_EQ(level_of[i], static_cast<int>(l));
      int deepest = -1;
      for (const Value& in : g.node(i).inputs) {
        EXPECT_LT(level_of[in.node], level_of[i]) << "node " << i << " depends on node " << in.node;
        deepest = std::max(deepest, level_of[in.node]);
      }
      // A write may sit higher than its inputs only to follow readers of the state it replaces.
      if (!has_side_effect(g.node(i).op)) {
        EXPECT_EQ(level_of[i], deepest + 1) << "node " << i;
      }
    }
  }
  // Readers of a token run in an earlier level than the write that consumes that token.
  for (int r = 0; r < g.num_nodes(); ++r) {
    const int e = effect_input(g.node(r).op);
    if (e < 0 || has_side_effect(g.node(r).op)) continue;
    for (int w = 0; w < g.num_nodes(); ++w) {
      const int we = effect_input(g.node(w).op);
      if (has_side_effect(g.node(w).op) && g.node(w).inputs[we] == g.node(r).inputs[e]) {
        EXPECT_LT(level_of[r], level_of[w]);
      }
    }
  }
  for (int i = 0; i < g.num_nodes(); ++i) {
    if (g.node(i).is_source()) {
      EXPECT_EQ(level_of[i], -1);
    }
  }
  EXPECT_EQ(scheduled, schedule_stats(levels).ops);
}

TEST(Schedule, LevelsOfASmallGraph) {
  Graph g = parse(R"IR(graph g() {
  %x = input "x" : f32[2,8]
  %w1 = param "w1" : f32[8,8]
  %w2 = param "w2" : f32[8,8]
  %a = matmul(%x, %w1) : f32[2,8]
  %b = matmul(%x, %w2) : f32[2,8]
  %c = gelu(%a) : f32[2,8]
  %d = add(%c, %b) : f32[2,8]
  return %d
})IR");
  const auto levels = schedule_levels(g);
  check_levels(g, levels);
  ASSERT_EQ(levels.size(), 3u);
  EXPECT_EQ(levels[0], (std::vector<int>{3, 4}));  // both matmuls at once
  EXPECT_EQ(levels[1], (std::vector<int>{5}));
  EXPECT_EQ(levels[2], (std::vector<int>{6}));
  const ScheduleStats s = schedule_stats(levels);
  EXPECT_EQ(s.ops, 4);
  EXPECT_EQ(s.levels, 3);
  EXPECT_EQ(s.max_width, 2);
}

TEST(Schedule, AWriteWaitsForReadersOfTheStateItReplaces) {
  Graph g = parse(R"IR(graph g() {
  %kv = state "kv" : f16[4,8]
  %k = input "k" : f32[1,8]
  %s = input "s" : i32[1]
  %bt = input "bt" : i32[1,2]
  %t0 = kv_write(%kv, %k, %k, %s) {layer=0} : token[]
  %q = gelu(%k) : f32[1,8]
  %q2 = gelu(%q) : f32[1,8]
  %a = attention(%q2, %t0, %bt, %s, %s, %s) {layer=0, n_heads=1, n_kv_heads=1, head_dim=8, window=0, scale=1.0} : f32[1,8]
  %t1 = kv_write(%t0, %k, %k, %s) {layer=1} : token[]
  return %a, %t1
})IR");
  check_levels(g, schedule_levels(g));
  const std::vector<int> level = node_levels(g);
  EXPECT_EQ(level[4], 0);  // first write
  EXPECT_EQ(level[7], 2);  // attention after gelu, gelu
  EXPECT_EQ(level[8], 3);  // second write: after the attention reads layer 0's state
}

// Traced as is, q/k/v and gate/up projections are independent and share a level. After the
// pipeline the decoder is a chain (those branches became one matmul_split each), so levels
// equal ops: the fusions, not concurrency, remove those barriers.
TEST(Schedule, TransformerGraphsHaveFewerBarriersThanOpsUntilFused) {
  for (bool optimize : {false, true}) {
    testing::ToyConfig c;
    c.layers = 3;
    Graph g = testing::build_toy_decoder(c);
    PipelineOptions options;
    options.rewrites = optimize;
    run_pipeline(g, options);
    const auto levels = schedule_levels(g);
    check_levels(g, levels);
    const ScheduleStats s = schedule_stats(levels);
    if (optimize) {
      EXPECT_EQ(s.levels, s.ops) << describe_schedule(g, levels);
    } else {
      EXPECT_LT(s.levels, s.ops) << describe_schedule(g, levels);
      EXPECT_EQ(s.max_width, 3);  // q, k, v projections
    }
  }
}

TEST(Schedule, SplitWorkers) {
  // More threads than nodes: disjoint, covering, proportional, each at least one.
  auto groups = split_workers({3.0, 1.0, 0.0}, 8);
  ASSERT_EQ(groups.size(), 3u);
  int next = 0;
  for (const WorkerGroup& w : groups) {
    EXPECT_EQ(w.first, next);
    EXPECT_GE(w.count, 1);
    next += w.count;
  }
  EXPECT_EQ(next, 8);
  EXPECT_GT(groups[0].count, groups[1].count);
  // Fewer threads than nodes: one thread each, balanced.
  groups = split_workers({5, 4, 3, 3, 1}, 2);
  std::vector<double> load(2, 0);
  const double costs[] = {5, 4, 3, 3, 1};
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(groups[i].count, 1);
    load[groups[i].first] += costs[i];
  }
  EXPECT_EQ(std::max(load[0], load[1]), 8);
}

}  // namespace
}  // namespace kiln::graph
