// Elementwise binary ops with a row-broadcast operand (shape inference allows b = [cols] for
// add and mul: a bias or a per-channel scale) must compute per row, reading only cols values
// of b, in eager mode and in a plan.
#include <gtest/gtest.h>

#include "graph/numeric_runs.h"
#include "graph/random_weights.h"
#include "kiln/graph/builder.h"

namespace kiln::graph {
namespace {

using testing::random_input;

void check_broadcast(Op op) {
  const int64_t T = 5, D = 37;
  testing::StepData data;
  data.inputs = {random_input("x", {T, D}, 40), random_input("b", {D}, 41)};
  Builder b("broadcast");
  auto in = testing::declare_inputs(b, data);
  // Once with the bias as a graph input, once as a param.
  Value p = b.param("bias", DType::F32, {D});
  Value y1 = op == Op::Add ? b.add(in["x"], in["b"]) : b.mul(in["x"], in["b"]);
  Value y2 = op == Op::Add ? b.add(in["x"], p) : b.mul(in["x"], p);
  b.output(y1);
  b.output(y2);
  Graph g = b.finish();
  testing::RandomWeights weights(42);
  weights.declare(g);
  ThreadPool pool(2);
  const testing::RunResult eager = testing::run_interpreted(g, data, weights, pool);
  const Tensor& bias = weights.raw(g.node(p.node));
  const float* x = data.inputs[0].tensor.data_as<float>();
  for (int which = 0; which < 2; ++which) {
    const float* bv = which == 0 ? data.inputs[1].tensor.data_as<float>() : bias.data_as<float>();
    const float* y = eager.outputs[which].data_as<float>();
    for (int64_t r = 0; r < T; ++r) {
      for (int64_t c = 0; c < D; ++c) {
        const float want = op == Op::Add ? x[r * D + c] + bv[c] : x[r * D + c] * bv[c];
        ASSERT_EQ(y[r * D + c], want)
            << op_name(op) << " output " << which << " row " << r << " col " << c;
      }
    }
  }
  EXPECT_TRUE(testing::same_bits(eager, testing::run_planned(g, data, weights, pool)));
}

TEST(LoweringBroadcast, AddOfABias) { check_broadcast(Op::Add); }
TEST(LoweringBroadcast, MulByARowVector) { check_broadcast(Op::Mul); }

}  // namespace
}  // namespace kiln::graph
