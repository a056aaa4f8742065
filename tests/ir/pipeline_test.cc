#include "kiln/graph/passes/pipeline.h"

#include <gtest/gtest.h>

#include <map>

#include "graph/test_graphs.h"
#include "kiln/graph/parser.h"
#include "kiln/graph/passes/inplace.h"
#include "kiln/graph/printer.h"

namespace kiln::graph {
namespace {

std::map<Op, int> op_counts(const Graph& g) {
  std::map<Op, int> counts;
  for (const Node& n : g.nodes()) ++counts[n.op];
  return counts;
}

TEST(Pipeline, GemmaShapedDecoderFusesEveryLayer) {
  testing::ToyConfig c;
  c.layers = 3;
  Graph g = testing::build_toy_decoder(c);
  PipelineOptions options;
  options.verify_each = true;
  std::vector<std::string> seen;
  options.after_pass = [&](std::string_view name, const Graph&) { seen.emplace_back(name); };
  const auto stats = run_pipeline(g, options);
  EXPECT_EQ(seen.size(), pipeline_passes().size());
  EXPECT_EQ(stats.size(), pipeline_passes().size());
  auto counts = op_counts(g);
  EXPECT_EQ(counts[Op::QkNormRopeKvWrite], 3);
  EXPECT_EQ(counts[Op::MatmulSplit], 6);  // QKV and gate/up per layer
  EXPECT_EQ(counts[Op::GeluMul], 3);
  // Both residual adds of each layer feed a norm (ffn_norm, then the next attn_norm), except
  // the last layer's second add, which feeds the fused LM head.
  EXPECT_EQ(counts[Op::AddRmsNorm], 5);
  EXPECT_EQ(counts[Op::NormMatmulArgmax], 1);
  EXPECT_EQ(counts[Op::KvWrite], 0);
  EXPECT_EQ(counts[Op::Matmul], 6);  // attn_output and ffn_down per layer
  EXPECT_EQ(counts[Op::Reshape], 0);
  // The original q/k/v/gate/up weights are gone; their concatenations replace them.
  EXPECT_FALSE(g.find_source(Op::Param, "blk.0.attn_q").has_value());
  EXPECT_TRUE(g.find_source(Op::Param, "blk.0.attn_q+blk.0.attn_k+blk.0.attn_v").has_value());
  EXPECT_NO_THROW(verify(g));
  // The result prints and parses back.
  std::string why;
  EXPECT_TRUE(structurally_equal(parse(print(g)), g, &why)) << why;
  const std::string table = format_pass_stats(stats);
  EXPECT_NE(table.find("fuse_qk_norm_rope_kv_write"), std::string::npos);
}

TEST(Pipeline, LlamaShapedDecoderUsesGemmEpilogues) {
  testing::ToyConfig c;
  c.gemma = false;
  Graph g = testing::build_toy_decoder(c);
  run_pipeline(g);
  auto counts = op_counts(g);
  EXPECT_EQ(counts[Op::MatmulAdd], 4);  // attn_output and ffn_down add into the residual
  EXPECT_EQ(counts[Op::SiluMul], 2);
  EXPECT_EQ(counts[Op::KvWrite], 2);  // no qk norm: the write stays
  EXPECT_EQ(counts[Op::AddRmsNorm], 0);
  EXPECT_NO_THROW(verify(g));
}

TEST(Pipeline, ReplayModeOnlyAnnotates) {
  testing::ToyConfig c;
  Graph g = testing::build_toy_decoder(c);
  const Graph before = g;
  PipelineOptions options;
  options.rewrites = false;
  const auto stats = run_pipeline(g, options);
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].name, "inplace");
  EXPECT_EQ(g.num_nodes(), before.num_nodes());
  int aliased = 0;
  for (const Node& n : g.nodes()) aliased += is_inplace(n);
  EXPECT_GT(aliased, 0);
}

TEST(Pipeline, SecondRunChangesNothing) {
  testing::ToyConfig c;
  Graph g = testing::build_toy_decoder(c);
  run_pipeline(g);
  const std::string once = print(g);
  for (const PassStats& s : run_pipeline(g)) EXPECT_FALSE(s.changed) << s.name;
  EXPECT_EQ(print(g), once);
}

}  // namespace
}  // namespace kiln::graph
