// The rope op with frequency factors (Llama 3) and partial rotary (Phi-4-mini) through the
// whole stack: builder, lowering, eager Interpreter and captured Plan. Eager and plan must
// agree bit for bit, and both must match a float64 reference of the op's definition (which
// catches a lowering that drops the factors or n_rot: both modes would then agree, wrongly).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "graph/numeric_runs.h"
#include "graph/random_weights.h"
#include "kiln/graph/builder.h"
#include "kiln/graph/passes/inplace.h"
#include "kiln/kernels/rope.h"

namespace kiln::graph {
namespace {

using testing::random_input;
using testing::RandomWeights;
using testing::same_bits;
using testing::StepData;

struct RopeCase {
  int head_dim;
  int heads;
  int n_rot;  // 0: head_dim
  bool neox;
  bool factors;
};

// Frequency i = float(float(base^(-2i/n_rot)) / factor_i), as the kernels define it; angle and
// rotation in double.
std::vector<float> rope_reference(const std::vector<float>& x, const std::vector<int32_t>& pos,
                                  const std::vector<float>& factors, const RopeCase& c,
                                  double base) {
  const int hd = c.head_dim, n_rot = c.n_rot == 0 ? hd : c.n_rot, half = n_rot / 2;
  const std::vector<float> inv = kernels::rope_inv_freq(n_rot, base);
  std::vector<float> out = x;
  for (size_t t = 0; t < pos.size(); ++t)
    for (int h = 0; h < c.heads; ++h) {
      const size_t row = (t * c.heads + h) * hd;
      for (int i = 0; i < half; ++i) {
        float f = inv[i];
        if (!factors.empty()) f = static_cast<float>(double(inv[i]) / double(factors[i]));
        const double a = double(pos[t]) * double(f);
        const int i0 = c.neox ? i : 2 * i, i1 = c.neox ? i + half : 2 * i + 1;
        const double x0 = x[row + i0], x1 = x[row + i1];
        out[row + i0] = static_cast<float>(x0 * std::cos(a) - x1 * std::sin(a));
        out[row + i1] = static_cast<float>(x1 * std::cos(a) + x0 * std::sin(a));
      }
    }
  return out;
}

class RopeNumeric : public ::testing::TestWithParam<RopeCase> {};

TEST_P(RopeNumeric, EagerEqualsPlanAndMatchesTheReference) {
  const RopeCase c = GetParam();
  const int64_t T = 5, cols = int64_t{c.heads} * c.head_dim;
  const int n_rot = c.n_rot == 0 ? c.head_dim : c.n_rot;
  const double base = 500000.0;
  StepData data;
  data.inputs = {random_input("x", {T, cols}, 7)};
  const std::vector<int32_t> pos = {0, 3, 1000, 8191, 131071};
  Tensor pos_t = Tensor::empty(DType::I32, {T});
  std::copy(pos.begin(), pos.end(), pos_t.data_as<int32_t>());
  data.inputs.push_back({"positions", pos_t});

  Builder b("rope");
  auto in = testing::declare_inputs(b, data);
  std::optional<Value> ff;
  if (c.factors) ff = b.param("rope_freqs.weight", DType::F32, {n_rot / 2});
  // Two readers of x: the rope cannot take x's buffer in place, so x stays as it was.
  b.output(b.rope(in["x"], in["positions"], c.head_dim, base, c.neox, ff, c.n_rot));
  b.output(b.scale(in["x"], 1.0));
  const Graph g = b.finish();
  if (c.n_rot == 0 || c.n_rot == c.head_dim) {
    EXPECT_FALSE(g.node(g.outputs()[0].node).attrs.has("n_rot"));  // full rotary: as before
  }

  RandomWeights weights(3);
  std::vector<float> factors;
  if (c.factors) {
    const Tensor& t = weights.tensor("rope_freqs.weight", g.type(*ff));
    for (int i = 0; i < n_rot / 2; ++i) {
      t.data_as<float>()[i] = 1.0f + 0.37f * static_cast<float>(i % 9);  // in [1, 4]
      factors.push_back(t.data_as<float>()[i]);
    }
  }
  Graph inplace = g;
  run_inplace(inplace, PassOptions{});
  ThreadPool pool(2);
  const testing::RunResult eager = testing::run_interpreted(g, data, weights, pool);
  EXPECT_TRUE(same_bits(eager, testing::run_planned(g, data, weights, pool))) << "plan";
  EXPECT_TRUE(same_bits(eager, testing::run_planned(inplace, data, weights, pool)))
      << "plan, in place";

  const Tensor& x = data.inputs[0].tensor;
  const std::vector<float> xv(x.data_as<float>(), x.data_as<float>() + x.shape().numel());
  const std::vector<float> want = rope_reference(xv, pos, factors, c, base);
  const float* got = eager.outputs[0].data_as<float>();
  for (size_t i = 0; i < want.size(); ++i) {
    const int d = static_cast<int>(i % c.head_dim);
    if (d >= n_rot) {
      ASSERT_EQ(got[i], xv[i]) << "element " << i << ": a dimension past n_rot changed";
    } else {
      ASSERT_NEAR(got[i], want[i], 1e-6 + 1e-6 * std::fabs(want[i])) << "element " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, RopeNumeric,
    ::testing::Values(RopeCase{32, 3, 0, true, false}, RopeCase{32, 3, 0, false, true},
                      RopeCase{32, 3, 24, true, false}, RopeCase{32, 3, 24, false, false},
                      RopeCase{32, 3, 24, true, true}, RopeCase{32, 3, 24, false, true},
                      RopeCase{14, 5, 6, true, true}, RopeCase{14, 5, 10, false, true},
                      RopeCase{96, 1, 64, true, true}),
    [](const ::testing::TestParamInfo<RopeCase>& info) {
      const RopeCase& c = info.param;
      return "Hd" + std::to_string(c.head_dim) + "H" + std::to_string(c.heads) + "Rot" +
             std::to_string(c.n_rot) + (c.neox ? "Neox" : "Pairs") + (c.factors ? "Factors" : "");
    });

}  // namespace
}  // namespace kiln::graph
