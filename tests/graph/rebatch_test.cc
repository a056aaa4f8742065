// rebatch(): a graph traced (and optimized) at one batch size, rewritten for another, must be
// exactly what tracing (and optimizing) at that size gives; anything the batch rule cannot
// see is refused rather than guessed.
#include "kiln/graph/rebatch.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <optional>

#include "graph/test_graphs.h"
#include "kiln/base/error.h"
#include "kiln/graph/passes/pipeline.h"
#include "kiln/graph/printer.h"
#include "kiln/model/gguf.h"
#include "kiln/model/model_config.h"
#include "kiln/model/transformer.h"
#include "kiln/model/weight_store.h"
#include "tiny_models.h"

namespace kiln::graph {
namespace {

namespace fs = std::filesystem;

Graph toy(int batch, bool gemma) {
  testing::ToyConfig c;
  c.tokens = batch;
  c.seqs = batch;
  c.gemma = gemma;
  return testing::build_toy_decoder(c);
}

void expect_same(const Graph& got, const Graph& want) {
  std::string why;
  EXPECT_TRUE(structurally_equal(got, want, &why)) << why << "\n--- got\n"
                                                   << print(got) << "--- want\n"
                                                   << print(want);
}

// The optimized template rewritten for `batch`, then given the analyses (the pipeline without
// rewrites), as capture does; nullopt when rebatch refuses.
std::optional<Graph> rebatch_optimized(const Graph& tmpl, int batch) {
  auto got = rebatch(tmpl, kTemplateBatch, batch);
  if (!got) return got;
  PipelineOptions analyses_only;
  analyses_only.rewrites = false;
  run_pipeline(*got, analyses_only);
  return got;
}

TEST(Rebatch, TracedToyDecoderMatchesTracingAtTheNewSize) {
  for (bool gemma : {true, false}) {
    const Graph from = toy(kTemplateBatch, gemma);
    for (int b : {1, 2, 3, 7, 32}) {
      SCOPED_TRACE(::testing::Message() << "gemma " << gemma << " batch " << b);
      auto got = rebatch(from, kTemplateBatch, b);
      ASSERT_TRUE(got.has_value());
      expect_same(*got, toy(b, gemma));
    }
  }
}

TEST(Rebatch, OptimizedToyDecoderMatchesOptimizingAtTheNewSize) {
  for (bool gemma : {true, false}) {
    Graph tmpl = toy(kTemplateBatch, gemma);
    PipelineOptions rewrites_only;
    rewrites_only.analyses = false;
    run_pipeline(tmpl, rewrites_only);
    const std::string before = print(tmpl);
    for (int b : {1, 4, 9}) {
      SCOPED_TRACE(::testing::Message() << "gemma " << gemma << " batch " << b);
      Graph want = toy(b, gemma);
      run_pipeline(want);
      auto got = rebatch_optimized(tmpl, b);
      ASSERT_TRUE(got.has_value());
      expect_same(*got, want);
      EXPECT_EQ(print(*got), print(want));  // value names carry over too
    }
    EXPECT_EQ(print(tmpl), before) << "the template must not change";
  }
}

TEST(Rebatch, RewritesReshapeTargetsAndNamedDims) {
  Builder b("decode");
  b.bind_dim("T", 6);
  Value x = b.input("x", DType::F32, {6, 8});
  b.output(b.gelu(b.reshape(x, {12, 4})));
  auto got = rebatch(b.finish(), 6, 5);
  ASSERT_TRUE(got.has_value());
  Builder w("decode");
  w.bind_dim("T", 5);
  Value y = w.input("x", DType::F32, {5, 8});
  w.output(w.gelu(w.reshape(y, {10, 4})));
  expect_same(*got, w.finish());
}

// A reshape whose target hides the batch (12 = 2 * 6 elements as [4, 3]): the rewritten input
// no longer fits the target, so the graph is refused, not mis-sized.
TEST(Rebatch, RefusesBatchHiddenInAShape) {
  Builder b("decode");
  Value x = b.input("x", DType::F32, {12});
  b.output(b.gelu(b.reshape(x, {4, 3})));
  std::string why;
  EXPECT_FALSE(rebatch(b.finish(), 6, 5, &why).has_value());
  EXPECT_NE(why.find("reshape"), std::string::npos) << why;
}

// An attribute equal to (a multiple of) the batch may be batch-dependent: refused.
TEST(Rebatch, RefusesBatchValuedAttributes) {
  Builder b("decode");
  Value x = b.input("x", DType::F32, {7, 56});
  Value pos = b.input("positions", DType::I32, {7});
  b.output(b.rope(x, pos, /*head_dim=*/14, 10000.0, false));
  std::string why;
  EXPECT_FALSE(rebatch(b.finish(), 7, 3, &why).has_value());
  EXPECT_NE(why.find("head_dim"), std::string::npos) << why;
}

TEST(Rebatch, RejectsBadSizes) {
  const Graph g = toy(2, true);
  EXPECT_THROW(rebatch(g, 1, 3), Error);
  EXPECT_THROW(rebatch(g, 2, 0), Error);
}

// On the fixture models (real configs, mixed quantizations, every fusion): the template
// optimized once and rebatched equals the pipeline run at each size, for both output kinds.
using kiln::testing::tiny_model;

class RebatchModel : public ::testing::TestWithParam<std::string> {};

TEST_P(RebatchModel, TemplateEqualsPipelineAtEverySize) {
  const fs::path path = tiny_model(GetParam());
  ASSERT_TRUE(fs::exists(path)) << "fixture missing (tests/fixtures/generate_all.py): " << path;
  auto file = model::GgufFile::open(path.string());
  const model::ModelConfig c = model::read_model_config(*file);
  model::WeightStore store(file);
  auto trace = [&](int64_t bs, bool greedy) {
    model::ForwardShape shape;
    shape.tokens = bs;
    shape.seqs = bs;
    shape.max_pages_per_seq = 16;
    shape.greedy = greedy;
    shape.kv_pages = 64;
    shape.page_size = 16;
    return model::build_forward(c, store.lookup(), shape, "decode");
  };
  for (bool greedy : {true, false}) {
    const Graph traced = trace(kTemplateBatch, greedy);
    Graph tmpl = traced;
    PipelineOptions rewrites_only;
    rewrites_only.analyses = false;
    run_pipeline(tmpl, rewrites_only);
    for (int bs : {1, 2, 3, 5, 8, 16, 32}) {
      SCOPED_TRACE(::testing::Message() << "greedy " << greedy << " batch " << bs);
      Graph want = trace(bs, greedy);
      auto retraced = rebatch(traced, kTemplateBatch, bs);
      ASSERT_TRUE(retraced.has_value());
      expect_same(*retraced, want);
      run_pipeline(want);
      auto got = rebatch_optimized(tmpl, bs);
      ASSERT_TRUE(got.has_value());
      EXPECT_EQ(print(*got), print(want));
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tiny, RebatchModel, ::testing::ValuesIn(kiln::testing::kTinyModels),
                         kiln::testing::model_param_name);

}  // namespace
}  // namespace kiln::graph
