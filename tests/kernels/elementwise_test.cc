#include "kiln/kernels/elementwise.h"

#include <cmath>
#include <limits>

#include "kernel_test_util.h"
#include "kiln/base/error.h"

namespace kiln::kernels {
namespace {

using testing::all_close;
using testing::bits_equal;
using testing::random_floats;
using testing::run_group;

// Sizes: every tail 1..67, common widths, and sizes large enough to be split across threads.
std::vector<int64_t> test_sizes() {
  std::vector<int64_t> s;
  for (int64_t n = 1; n <= 67; ++n) s.push_back(n);
  for (int64_t n : {640, 1000, 2048, 9000, 20011}) s.push_back(n);
  return s;
}

// Tolerances (vector path vs the scalar libm reference): exact for add/mul/scale;
// transcendental ones within 4e-6 relative + 1e-7 absolute (a few float ulps).
constexpr double kRel = 4e-6;
constexpr double kAbs = 1e-7;

double gelu_f64(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
}
double silu_f64(double x) { return x / (1.0 + std::exp(-x)); }

class ElementwiseTest : public testing::IsaTest {};

TEST_P(ElementwiseTest, ExactOpsMatchScalarBitForBit) {
  for (int64_t n : test_sizes()) {
    auto a = random_floats(n, 1 + n), b = random_floats(n, 1000 + n);
    std::vector<float> got(n), want(n);
    for (int op = 0; op < 3; ++op) {
      auto call = [&](std::vector<float>& out) {
        ExecContext ctx;
        if (op == 0) add(a.data(), b.data(), out.data(), n, ctx);
        if (op == 1) mul(a.data(), b.data(), out.data(), n, ctx);
        if (op == 2) scale(a.data(), 0.37f, out.data(), n, ctx);
      };
      call(got);
      set_isa_cap(Isa::Scalar);
      call(want);
      set_isa_cap(GetParam());
      ASSERT_TRUE(bits_equal(got, want)) << "op " << op << " n " << n;
    }
  }
}

TEST_P(ElementwiseTest, TranscendentalOpsMatchScalarReference) {
  for (int64_t n : test_sizes()) {
    auto x = random_floats(n, 7 + n, -9.0f, 9.0f), y = random_floats(n, 99 + n);
    for (int op = 0; op < 5; ++op) {
      auto call = [&](std::vector<float>& out) {
        ExecContext ctx;
        if (op == 0) gelu_tanh(x.data(), out.data(), n, ctx);
        if (op == 1) silu(x.data(), out.data(), n, ctx);
        if (op == 2) softcap(x.data(), 3.5f, out.data(), n, ctx);
        if (op == 3) gelu_mul(x.data(), y.data(), out.data(), n, ctx);
        if (op == 4) silu_mul(x.data(), y.data(), out.data(), n, ctx);
      };
      std::vector<float> got(n), want(n);
      call(got);
      set_isa_cap(Isa::Scalar);
      call(want);
      set_isa_cap(GetParam());
      ASSERT_TRUE(all_close(got, want, kRel, kAbs)) << "op " << op << " n " << n;
    }
  }
}

TEST_P(ElementwiseTest, ActivationsMatchFloat64Formulas) {
  const int64_t n = 4001;
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) x[i] = -20.0f + 40.0f * static_cast<float>(i) / (n - 1);
  std::vector<float> g(n), s(n), c(n);
  ExecContext ctx;
  gelu_tanh(x.data(), g.data(), n, ctx);
  silu(x.data(), s.data(), n, ctx);
  softcap(x.data(), 30.0f, c.data(), n, ctx);
  std::vector<float> g64(n), s64(n), c64(n);
  for (int64_t i = 0; i < n; ++i) {
    g64[i] = static_cast<float>(gelu_f64(x[i]));
    s64[i] = static_cast<float>(silu_f64(x[i]));
    c64[i] = static_cast<float>(30.0 * std::tanh(x[i] / 30.0));
  }
  EXPECT_TRUE(all_close(g, g64, kRel, 1e-6));
  EXPECT_TRUE(all_close(s, s64, kRel, 1e-6));
  EXPECT_TRUE(all_close(c, c64, kRel, kAbs));
}

TEST_P(ElementwiseTest, GeluErfMatchesFloat64Reference) {
  for (int64_t n : test_sizes()) {
    auto x = random_floats(n, 41 + n, -9.0f, 9.0f);
    std::vector<float> got(n), want(n);
    gelu_erf(x.data(), got.data(), n, ExecContext{});
    for (int64_t i = 0; i < n; ++i)
      want[i] = static_cast<float>(0.5 * x[i] * (1.0 + std::erf(x[i] / std::sqrt(2.0))));
    // The polynomial erf is within 1.5e-7 absolute; times 0.5|x| <= 4.5.
    ASSERT_TRUE(all_close(got, want, kRel, 1e-6)) << "n " << n;
  }
  std::vector<float> x = {0.0f, 100.0f, -100.0f, std::nanf("")}, out(4);
  gelu_erf(x.data(), out.data(), 4, ExecContext{});
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_FLOAT_EQ(out[1], 100.0f);
  EXPECT_NEAR(out[2], 0.0f, 1e-30f);
  EXPECT_TRUE(std::isnan(out[3]));
}

TEST_P(ElementwiseTest, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> x = {0.0f, -0.0f, 1e-30f, -1e-30f, 100.0f, -100.0f, 1e6f, -1e6f, inf, -inf};
  int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> out(n);
  ExecContext ctx;
  softcap(x.data(), 50.0f, out.data(), n, ctx);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_NEAR(out[2], 1e-30f, 1e-36f);  // small arguments keep relative accuracy
  EXPECT_EQ(out[8], 50.0f);
  EXPECT_EQ(out[9], -50.0f);
  gelu_tanh(x.data(), out.data(), n, ctx);
  EXPECT_EQ(out[0], 0.0f);
  EXPECT_FLOAT_EQ(out[4], 100.0f);
  EXPECT_NEAR(out[5], 0.0f, 1e-30f);
  EXPECT_FLOAT_EQ(out[6], 1e6f);
  silu(x.data(), out.data(), n, ctx);
  EXPECT_FLOAT_EQ(out[4], 100.0f);
  EXPECT_NEAR(out[5], 0.0f, 1e-30f);
  std::vector<float> nan = {std::nanf("")};
  gelu_tanh(nan.data(), nan.data(), 1, ctx);
  EXPECT_TRUE(std::isnan(nan[0]));
}

TEST_P(ElementwiseTest, FusedActivationMulEqualsUnfusedBitForBit) {
  for (int64_t n : {1, 17, 640, 2048, 9000}) {
    auto g = random_floats(n, 3 + n, -6, 6), u = random_floats(n, 5 + n);
    std::vector<float> fused(n), act(n), unfused(n);
    ExecContext ctx;
    gelu_mul(g.data(), u.data(), fused.data(), n, ctx);
    gelu_tanh(g.data(), act.data(), n, ctx);
    mul(act.data(), u.data(), unfused.data(), n, ctx);
    EXPECT_TRUE(bits_equal(fused, unfused)) << "gelu n " << n;
    silu_mul(g.data(), u.data(), fused.data(), n, ctx);
    silu(g.data(), act.data(), n, ctx);
    mul(act.data(), u.data(), unfused.data(), n, ctx);
    EXPECT_TRUE(bits_equal(fused, unfused)) << "silu n " << n;
  }
}

TEST_P(ElementwiseTest, InPlaceAndThreadCountGiveIdenticalResults) {
  const int64_t n = 20011;
  auto x = random_floats(n, 11), y = random_floats(n, 12);
  std::vector<float> one(n);
  gelu_mul(x.data(), y.data(), one.data(), n, ExecContext{});
  for (int nth : {2, 3}) {
    std::vector<float> inplace = x;
    run_group(nth, [&](const ExecContext& ctx) {
      gelu_mul(inplace.data(), y.data(), inplace.data(), n, ctx);
    });
    EXPECT_TRUE(bits_equal(inplace, one)) << nth << " threads";
  }
}

TEST_P(ElementwiseTest, RowBroadcastAddsBiasToEveryRow) {
  for (int64_t cols : {1, 7, 33, 640}) {
    for (int64_t rows : {1, 5, 33}) {
      auto a = random_floats(rows * cols, 21), b = random_floats(cols, 22);
      std::vector<float> out(rows * cols);
      run_group(2, [&](const ExecContext& ctx) {
        add_row_broadcast(a.data(), b.data(), out.data(), rows, cols, ctx);
      });
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) ASSERT_EQ(out[r * cols + c], a[r * cols + c] + b[c]);
    }
  }
}

TEST_P(ElementwiseTest, BadArgumentsThrow) {
  std::vector<float> x(4);
  EXPECT_THROW(softcap(x.data(), 0.0f, x.data(), 4, ExecContext{}), Error);
  EXPECT_THROW(add(x.data(), x.data(), x.data(), -1, ExecContext{}), Error);
}

KILN_INSTANTIATE_ISA_TESTS(ElementwiseTest);

}  // namespace
}  // namespace kiln::kernels
