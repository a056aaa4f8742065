// The passes do work linear in the graph's size: the nodes they visit (graph_nodes_walked(),
// counted by every whole-graph walk and by the rewriter) grow with the number of layers like
// the graph does. A pass that copied the graph or rescanned it from the start per match (as
// they once did) visits n nodes per match, so its count grows with the square of the layers
// and these tests fail, without timing anything.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

#include "graph/test_graphs.h"
#include "kiln/graph/parser.h"
#include "kiln/graph/passes/cse.h"
#include "kiln/graph/passes/noop_elim.h"
#include "kiln/graph/passes/pipeline.h"

namespace kiln::graph {
namespace {

struct PassWork {
  std::string pass;
  int64_t walked = 0;
  int nodes = 0;  // before the pass
};

// Runs the pipeline pass by pass and records each pass's visits.
std::vector<PassWork> pipeline_work(Graph g) {
  std::vector<PassWork> work;
  for (const PassEntry& pass : pipeline_passes()) {
    PassWork w{std::string(pass.name), 0, g.num_nodes()};
    const int64_t before = graph_nodes_walked();
    pass.run(g, PassOptions{});
    w.walked = graph_nodes_walked() - before;
    work.push_back(w);
    verify(g);
  }
  return work;
}

// Per node of the graph, the deep graph may cost at most this much more than the shallow one
// (a quadratic pass costs about layers_deep / layers_shallow = 8 times more).
constexpr double kSlack = 1.5;

void expect_linear(const testing::ToyConfig& shallow_config) {
  testing::ToyConfig deep_config = shallow_config;
  deep_config.layers = shallow_config.layers * 8;
  const auto shallow = pipeline_work(testing::build_toy_decoder(shallow_config));
  const auto deep = pipeline_work(testing::build_toy_decoder(deep_config));
  ASSERT_EQ(shallow.size(), deep.size());
  for (size_t p = 0; p < shallow.size(); ++p) {
    SCOPED_TRACE(shallow[p].pass);
    // The counter is live for every pass (each at least looks at every node once).
    EXPECT_GE(shallow[p].walked, shallow[p].nodes);
    const double per_node_shallow = double(shallow[p].walked) / shallow[p].nodes;
    const double per_node_deep = double(deep[p].walked) / deep[p].nodes;
    EXPECT_LE(per_node_deep, per_node_shallow * kSlack)
        << shallow[p].walked << " visits for " << shallow[p].nodes << " nodes, " << deep[p].walked
        << " for " << deep[p].nodes;
  }
}

TEST(PassScaling, GemmaShapedDecoderPassesAreLinearInLayers) {
  testing::ToyConfig c;
  c.layers = 3;
  c.gemma = true;
  expect_linear(c);
}

TEST(PassScaling, LlamaShapedDecoderPassesAreLinearInLayers) {
  testing::ToyConfig c;
  c.layers = 3;
  c.gemma = false;
  expect_linear(c);
}

// The toy decoders have no duplicates or no-ops: a chain with one of each per layer.
std::string redundant_chain(int layers) {
  std::string ir = "graph g() {\n  %x0 = input \"x\" : f32[2,8]\n";
  for (int l = 1; l <= layers; ++l) {
    ir += fmt::format("  %a{0} = add(%x{1}, %x{1}) : f32[2,8]\n", l, l - 1);
    ir += fmt::format("  %b{0} = add(%x{1}, %x{1}) : f32[2,8]\n", l, l - 1);
    ir += fmt::format("  %c{0} = copy(%b{0}) : f32[2,8]\n", l);
    ir += fmt::format("  %x{0} = mul(%a{0}, %c{0}) : f32[2,8]\n", l);
  }
  return ir + fmt::format("  return %x{}\n}}\n", layers);
}

int64_t walked_by(PassFn pass, int layers, int64_t expected_changes, const char* counter) {
  Graph g = parse(redundant_chain(layers));
  const int64_t before = graph_nodes_walked();
  const PassResult r = pass(g, PassOptions{});
  EXPECT_EQ(r.counter(counter), expected_changes);
  verify(g);
  return graph_nodes_walked() - before;
}

TEST(PassScaling, CseAndNoopElimAreLinearInDuplicates) {
  // 4 nodes per layer before either pass: per node, 64 layers may cost little more than 8.
  for (auto [pass, counter] : {std::pair<PassFn, const char*>{run_cse, "nodes_merged"},
                               std::pair<PassFn, const char*>{run_noop_elim, "noops_removed"}}) {
    SCOPED_TRACE(counter);
    const int64_t shallow = walked_by(pass, 8, 8, counter);
    const int64_t deep = walked_by(pass, 64, 64, counter);
    EXPECT_GT(shallow, 0);
    EXPECT_LE(deep, shallow * 8 * kSlack)
        << shallow << " visits for 8 layers, " << deep << " for 64";
  }
}

}  // namespace
}  // namespace kiln::graph
