// `kiln graph`'s data (engine/graph_mode/graph_inspector.h) on a tiny model: the IR printed before
// and after every pass reads back with graph::parse to the same text, the passes change the graph
// in optimize mode and leave its node count alone in replay mode, and the memory plan and
// schedule figures are consistent.
#include "kiln/engine/graph_mode/graph_inspector.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "kiln/base/error.h"
#include "kiln/graph/parser.h"
#include "kiln/graph/printer.h"
#include "tiny_models.h"

namespace kiln::testing {
namespace {

std::string tiny_gemma() { return tiny_model("tiny-gemma3").string(); }

TEST(GraphInspector, IrOfEveryPassParsesBack) {
  ASSERT_TRUE(std::filesystem::exists(tiny_gemma())) << "fixture missing: " << tiny_gemma();
  engine::GraphInspectOptions o;
  o.model_path = tiny_gemma();
  o.batch_size = 3;
  o.greedy = true;
  std::vector<std::pair<std::string, std::string>> after;
  o.after_pass = [&](std::string_view pass, const graph::Graph& g) {
    after.emplace_back(pass, graph::print(g));
  };
  engine::GraphInspection r = engine::inspect_graph(o);

  ASSERT_FALSE(r.passes.empty());
  ASSERT_EQ(after.size(), r.passes.size()) << "one after-pass hook call per pass run";
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i].first, r.passes[i].name);
    SCOPED_TRACE("after " + after[i].first);
    graph::Graph parsed = graph::parse(after[i].second);
    EXPECT_EQ(graph::print(parsed), after[i].second);
    EXPECT_EQ(parsed.num_nodes(), r.passes[i].nodes_after);
  }
  const std::string before = graph::print(r.traced);
  EXPECT_EQ(graph::print(graph::parse(before)), before);
  EXPECT_EQ(after.back().second, graph::print(r.optimized));

  EXPECT_LT(r.optimized.num_nodes(), r.traced.num_nodes())
      << "fusions and DCE shrink the decode graph";
  bool any_changed = false;
  for (const auto& p : r.passes) any_changed = any_changed || p.changed;
  EXPECT_TRUE(any_changed);
  EXPECT_NE(graph::format_pass_stats(r.passes).find(r.passes.front().name), std::string::npos);

  EXPECT_GT(r.memory.arena_bytes, 0u);
  EXPECT_GE(r.memory.planned_bytes, r.memory.arena_bytes);
  EXPECT_GE(r.memory.reuse_ratio(), 1.0);
  EXPECT_LE(r.schedule_after.levels, r.schedule_after.ops);
  EXPECT_EQ(
      r.schedule_before.ops, r.traced.num_nodes() - [&] {
        int sources = 0;
        for (const auto& n : r.traced.nodes()) sources += n.is_source() ? 1 : 0;
        return sources;
      }());
}

TEST(GraphInspector, ReplayModeRewritesNothing) {
  ASSERT_TRUE(std::filesystem::exists(tiny_gemma())) << "fixture missing: " << tiny_gemma();
  engine::GraphInspectOptions o;
  o.model_path = tiny_gemma();
  o.optimize = false;
  engine::GraphInspection r = engine::inspect_graph(o);
  EXPECT_EQ(r.optimized.num_nodes(), r.traced.num_nodes());
}

TEST(GraphInspector, BadInputIsAnError) {
  engine::GraphInspectOptions o;
  o.model_path = "/nonexistent/model.gguf";
  EXPECT_THROW(engine::inspect_graph(o), kiln::Error);
  o.model_path = tiny_gemma();
  o.batch_size = 0;
  EXPECT_THROW(engine::inspect_graph(o), kiln::Error);
}

}  // namespace
}  // namespace kiln::testing
