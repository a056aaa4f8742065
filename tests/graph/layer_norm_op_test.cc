// The decoder's LayerNorm and exact-GELU ops (StarCoder 2, Command-R, Falcon): layer_norm with
// and without its optional bias and gelu_erf, against float64 references, in eager mode and in a
// plan (bit for bit alike).
#include <gtest/gtest.h>

#include <cmath>

#include "graph/numeric_runs.h"
#include "graph/random_weights.h"
#include "kiln/graph/builder.h"

namespace kiln::graph {
namespace {

using testing::random_input;

constexpr int64_t kRows = 5;
constexpr int64_t kCols = 67;  // not a multiple of any vector width: the tails count too
constexpr double kEps = 1e-5;

// (x - mean) / sqrt(var + eps) * w + b in float64, var the biased variance.
double layer_norm_ref(const float* x, const float* w, const float* b, int64_t c) {
  double mean = 0, var = 0;
  for (int64_t i = 0; i < kCols; ++i) mean += x[i];
  mean /= kCols;
  for (int64_t i = 0; i < kCols; ++i) var += (x[i] - mean) * (x[i] - mean);
  var /= kCols;
  const double y = (x[c] - mean) / std::sqrt(var + kEps) * w[c];
  return b != nullptr ? y + b[c] : y;
}

TEST(LayerNormOp, WithAndWithoutBiasMatchFloat64) {
  testing::StepData data;
  data.inputs = {random_input("x", {kRows, kCols}, 50)};
  Builder b("layer_norm");
  auto in = testing::declare_inputs(b, data);
  Value w = b.param("w", DType::F32, {kCols});
  Value bias = b.param("b", DType::F32, {kCols});
  b.output(b.layer_norm(in["x"], w, bias, kEps));
  b.output(b.layer_norm(in["x"], w, std::nullopt, kEps));
  Graph g = b.finish();
  testing::RandomWeights weights(51);
  weights.declare(g);
  ThreadPool pool(2);
  const testing::RunResult eager = testing::run_interpreted(g, data, weights, pool);
  const float* x = data.inputs[0].tensor.data_as<float>();
  const float* wv = weights.raw(g.node(w.node)).data_as<float>();
  const float* bv = weights.raw(g.node(bias.node)).data_as<float>();
  for (int which = 0; which < 2; ++which) {
    const float* y = eager.outputs[which].data_as<float>();
    for (int64_t r = 0; r < kRows; ++r) {
      for (int64_t c = 0; c < kCols; ++c) {
        const double want = layer_norm_ref(x + r * kCols, wv, which == 0 ? bv : nullptr, c);
        ASSERT_NEAR(y[r * kCols + c], want, 1e-5 * (1 + std::abs(want)))
            << (which == 0 ? "with bias" : "without bias") << " row " << r << " col " << c;
      }
    }
  }
  EXPECT_TRUE(testing::same_bits(eager, testing::run_planned(g, data, weights, pool)));
}

TEST(GeluErfOp, MatchesFloat64) {
  testing::StepData data;
  data.inputs = {random_input("x", {kRows, kCols}, 52)};
  Builder b("gelu_erf");
  auto in = testing::declare_inputs(b, data);
  b.output(b.gelu_erf(b.scale(in["x"], 4.0)));  // spread over [-4, 4], where erf bends
  Graph g = b.finish();
  testing::RandomWeights weights(53);
  weights.declare(g);
  ThreadPool pool(2);
  const testing::RunResult eager = testing::run_interpreted(g, data, weights, pool);
  const float* x = data.inputs[0].tensor.data_as<float>();
  const float* y = eager.outputs[0].data_as<float>();
  double worst_tanh_gap = 0;  // how far the tanh form would be: the test tells the two apart
  for (int64_t i = 0; i < kRows * kCols; ++i) {
    const double v = 4.0 * static_cast<double>(x[i]);
    const double want = 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    const double tanh_form =
        0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
    worst_tanh_gap = std::max(worst_tanh_gap, std::abs(tanh_form - want));
    ASSERT_NEAR(y[i], want, 2e-6 * (1 + std::abs(want))) << "x = " << v;
  }
  EXPECT_GT(worst_tanh_gap, 1e-4);
  EXPECT_TRUE(testing::same_bits(eager, testing::run_planned(g, data, weights, pool)));
}

}  // namespace
}  // namespace kiln::graph
