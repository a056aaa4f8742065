// The moe_ffn op in the graph layer: type rules, the text form, and numerics through the pass
// pipeline in both execution modes (eager interpreter and captured plan give the same bits,
// and a row's output does not depend on the batch it runs in).
#include <gtest/gtest.h>

#include <cstring>

#include "graph/numeric_runs.h"
#include "graph/random_weights.h"
#include "kiln/base/error.h"
#include "kiln/graph/builder.h"
#include "kiln/graph/parser.h"
#include "kiln/graph/passes/pipeline.h"
#include "kiln/graph/printer.h"

namespace kiln::graph {
namespace {

constexpr int64_t kExperts = 8;

// Two layers of residual + rms_norm + MoE FFN (Qwen3-MoE's FFN half), then a dense head.
Graph moe_graph(int64_t T, DType wt, int64_t D, int64_t F) {
  Builder b("moe");
  b.bind_dim("T", T);
  Value x = b.input("x", DType::F32, {T, D});
  for (int il = 0; il < 2; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    Value norm = b.param(p + "ffn_norm.weight", DType::F32, {D});
    Value router = b.param(p + "ffn_gate_inp.weight", il == 0 ? DType::F32 : wt, {kExperts, D});
    Value gate = b.param(p + "ffn_gate_exps.weight", wt, {kExperts, F, D});
    Value up = b.param(p + "ffn_up_exps.weight", wt, {kExperts, F, D});
    Value down = b.param(p + "ffn_down_exps.weight", wt, {kExperts, D, F});
    Value h = b.rms_norm(x, norm, 1e-6);
    x = b.add(x, b.moe_ffn(h, router, gate, up, down, 2, true));
  }
  b.output(b.matmul(x, b.param("output.weight", wt, {48, D})));
  return b.finish();
}

TEST(MoeFfnGraph, BuilderSetsAttributesAndTypes) {
  Graph g = moe_graph(3, DType::Q8_0, 64, 32);
  int found = 0;
  for (const Node& n : g.nodes()) {
    if (n.op != Op::MoeFfn) continue;
    ++found;
    EXPECT_EQ(n.attrs.get_int("n_experts"), kExperts);
    EXPECT_EQ(n.attrs.get_int("top_k"), 2);
    EXPECT_EQ(n.attrs.get_int("norm_topk_prob"), 1);
    EXPECT_EQ(n.outputs[0], (ValueType{DType::F32, Shape{3, 64}}));
  }
  EXPECT_EQ(found, 2);
}

constexpr const char* kText = R"(graph moe(T=3) {
  %h = input "h" : f32[3,64]
  %r = param "blk.0.ffn_gate_inp.weight" : f32[8,64]
  %g = param "blk.0.ffn_gate_exps.weight" : q8_0[8,32,64]
  %u = param "blk.0.ffn_up_exps.weight" : q8_0[8,32,64]
  %d = param "blk.0.ffn_down_exps.weight" : q8_0[8,64,32]
  %0 = moe_ffn(%h, %r, %g, %u, %d) {n_experts=8, top_k=2, norm_topk_prob=1} : f32[3,64]
  return %0
}
)";

TEST(MoeFfnGraph, TextFormRoundTrips) {
  Graph g = parse(kText);
  EXPECT_EQ(print(g), kText);
  Graph built = moe_graph(3, DType::Q8_0, 64, 32);
  Graph again = parse(print(built));
  std::string why;
  EXPECT_TRUE(structurally_equal(built, again, &why)) << why;
  EXPECT_EQ(print(again), print(built));
}

void expect_parse_error(const std::string& text, const std::string& needle) {
  try {
    parse(text);
    FAIL() << "parsed without error:\n" << text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

std::string replaced(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.replace(at, from.size(), to);
}

TEST(MoeFfnGraph, TypeRulesRejectMismatches) {
  expect_parse_error(replaced(kText, "q8_0[8,64,32]", "q8_0[8,32,64]"), "down_exps");
  expect_parse_error(replaced(kText, "q8_0[8,32,64]\n  %u", "q8_0[7,32,64]\n  %u"), "gate_exps");
  expect_parse_error(replaced(kText, "top_k=2", "top_k=9"), "exceeds n_experts");
  expect_parse_error(replaced(kText, "n_experts=8", "n_experts=4"), "router has 8 rows");
  expect_parse_error(replaced(kText, "norm_topk_prob=1", "norm_topk_prob=2"), "norm_topk_prob");
  // Group-limited routing: the groups must divide the experts and hold the top-k.
  expect_parse_error(replaced(kText, "norm_topk_prob=1", "norm_topk_prob=1, n_groups=3"),
                     "n_groups=3");
  expect_parse_error(
      replaced(kText, "norm_topk_prob=1", "norm_topk_prob=1, n_groups=8, topk_groups=1"),
      "topk_groups=1");
  expect_parse_error(replaced(kText, "q8_0[8,32,64]\n  %u", "q8_0[8,32,64,1]\n  %u"), "rank 3");
  // The experts' K must be whole blocks: F = 48 is not a multiple of q8_0's 32 for down.
  expect_parse_error(
      replaced(replaced(replaced(kText, "q8_0[8,32,64]\n  %u", "q8_0[8,48,64]\n  %u"),
                        "q8_0[8,32,64]\n  %d", "q8_0[8,48,64]\n  %d"),
               "q8_0[8,64,32]", "q8_0[8,64,48]"),
      "block size");
}

struct Runs {
  testing::RunResult traced_eager, optimized_eager, planned;
};

Runs run_all(int64_t T, DType wt, int64_t D, int64_t F, const Tensor& x, ThreadPool& pool) {
  const Graph traced = moe_graph(T, wt, D, F);
  Graph optimized = traced;
  PipelineOptions options;
  options.verify_each = true;
  run_pipeline(optimized, options);
  testing::RandomWeights weights(77);
  weights.declare(traced);
  testing::StepData data;
  data.inputs.push_back({"x", x});
  Runs r;
  r.traced_eager = testing::run_interpreted(traced, data, weights, pool);
  r.optimized_eager = testing::run_interpreted(optimized, data, weights, pool);
  r.planned = testing::run_planned(optimized, data, weights, pool);
  return r;
}

TEST(MoeFfnGraph, EagerAndPlanGiveTheSameBitsAndRowsAreBatchInvariant) {
  ThreadPool pool(2);
  struct Case {
    DType wt;
    int64_t d, f;
  };
  for (const Case& c :
       {Case{DType::F32, 48, 40}, Case{DType::Q8_0, 64, 96}, Case{DType::Q4_K, 256, 256}}) {
    const Tensor x7 = testing::random_tensor(DType::F32, {7, c.d}, 5);
    testing::RunResult seven;
    for (int64_t T : {1, 3, 7}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(c.wt) << " T=" << T);
      const Runs r = run_all(T, c.wt, c.d, c.f, x7.slice_rows(7 - T, 7), pool);
      EXPECT_TRUE(testing::same_bits(r.traced_eager, r.optimized_eager)) << "optimized, eager";
      EXPECT_TRUE(testing::same_bits(r.traced_eager, r.planned)) << "optimized, plan";
      if (T == 7) seven = r.planned;
    }
    // Row i alone equals row i of the batch of 7.
    for (int64_t i = 0; i < 7; ++i) {
      const Runs r = run_all(1, c.wt, c.d, c.f, x7.slice_rows(i, i + 1), pool);
      const Tensor& one = r.planned.outputs[0];
      const Tensor& all = seven.outputs[0];
      EXPECT_EQ(std::memcmp(one.data(), static_cast<const char*>(all.data()) + i * one.nbytes(),
                            one.nbytes()),
                0)
          << dtype_name(c.wt) << " row " << i;
    }
  }
}

}  // namespace
}  // namespace kiln::graph
