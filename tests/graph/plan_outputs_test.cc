// Every kind of value a graph may return must reach the plan's output buffers exactly as the
// interpreter returns it: computed values, views (reshape) of computed values, and values
// returned twice.
#include <gtest/gtest.h>

#include "graph/numeric_runs.h"
#include "graph/random_weights.h"
#include "kiln/base/error.h"
#include "kiln/graph/builder.h"
#include "kiln/graph/passes/inplace.h"

namespace kiln::graph {
namespace {

using testing::random_input;

void check_plan_matches_eager(Graph g, const testing::StepData& data) {
  testing::RandomWeights weights(70);
  weights.declare(g);
  ThreadPool pool(2);
  const testing::RunResult eager = testing::run_interpreted(g, data, weights, pool);
  EXPECT_TRUE(testing::same_bits(eager, testing::run_planned(g, data, weights, pool)));
  run_inplace(g, {});
  EXPECT_TRUE(testing::same_bits(eager, testing::run_planned(g, data, weights, pool)))
      << "with in-place aliasing";
}

TEST(PlanOutputs, AReshapeOfAComputedValue) {
  testing::StepData data;
  data.inputs = {random_input("x", {3, 8}, 71)};
  Builder b("view_out");
  auto in = testing::declare_inputs(b, data);
  Value y = b.scale(in["x"], 2.0);
  b.output(b.reshape(y, {24}));
  check_plan_matches_eager(b.finish(), data);
}

TEST(PlanOutputs, AValueAndAViewOfIt) {
  testing::StepData data;
  data.inputs = {random_input("x", {3, 8}, 72)};
  Builder b("value_and_view");
  auto in = testing::declare_inputs(b, data);
  Value y = b.silu(in["x"]);
  b.output(y);
  b.output(b.reshape(y, {6, 4}));
  b.output(b.gelu(b.reshape(y, {4, 6})));
  check_plan_matches_eager(b.finish(), data);
}

TEST(PlanOutputs, TheSameValueTwice) {
  testing::StepData data;
  data.inputs = {random_input("x", {3, 8}, 73)};
  Builder b("twice");
  auto in = testing::declare_inputs(b, data);
  Value y = b.scale(in["x"], 0.5);
  b.output(y);
  b.output(y);
  check_plan_matches_eager(b.finish(), data);
}

TEST(PlanOutputs, AnInputAndAViewOfIt) {
  testing::StepData data;
  data.inputs = {random_input("x", {3, 8}, 74)};
  Builder b("input_out");
  auto in = testing::declare_inputs(b, data);
  b.output(in["x"]);
  b.output(b.reshape(in["x"], {8, 3}));
  b.output(b.scale(in["x"], 3.0));
  check_plan_matches_eager(b.finish(), data);
}

TEST(PlanOutputs, AWeightOrTheStateIsRefusedWithAnError) {
  for (bool state : {false, true}) {
    Builder b("param_out");
    Value x = b.input("x", DType::F32, {3, 8});
    Value w = state ? b.state("kv_pool", DType::F16, {2, 1, 16, 8}) : b.param("w", DType::F32, {8});
    b.output(b.scale(x, 2.0));
    b.output(b.reshape(w, state ? Shape{32, 8} : Shape{2, 4}));
    EXPECT_THROW(Plan::prepare(b.finish(), PlanOptions{}), Error);
  }
}

}  // namespace
}  // namespace kiln::graph
