#include "kiln/kernels/norm.h"

#include <cmath>

#include "kernel_test_util.h"
#include "kiln/base/error.h"
#include "kiln/kernels/elementwise.h"

namespace kiln::kernels {
namespace {

using testing::all_close;
using testing::bits_equal;
using testing::random_floats;
using testing::run_group;

// Float accumulation in the vector paths vs double in the reference: 2e-6 relative.
constexpr double kRel = 2e-6;
constexpr double kAbs = 1e-7;

std::vector<float> norm_f64(const std::vector<float>& x, const std::vector<float>& w, int64_t rows,
                            int64_t cols, double eps) {
  std::vector<float> out(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    double ss = 0;
    for (int64_t c = 0; c < cols; ++c) ss += double(x[r * cols + c]) * x[r * cols + c];
    double inv = 1.0 / std::sqrt(ss / cols + eps);
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = float(x[r * cols + c] * inv * w[c]);
  }
  return out;
}

std::vector<int64_t> test_cols() {
  std::vector<int64_t> s;
  for (int64_t n = 1; n <= 67; ++n) s.push_back(n);
  s.push_back(256);
  s.push_back(640);
  s.push_back(1000);
  return s;
}

class NormTest : public testing::IsaTest {};

TEST_P(NormTest, MatchesFloat64Reference) {
  for (int64_t cols : test_cols()) {
    for (int64_t rows : {1, 2, 5, 33}) {
      auto x = random_floats(rows * cols, 17 * cols + rows);
      auto w = random_floats(cols, 3 + cols, 0.5f, 1.5f);
      std::vector<float> out(rows * cols);
      rms_norm(x.data(), w.data(), out.data(), rows, cols, 1e-6f, ExecContext{});
      ASSERT_TRUE(all_close(out, norm_f64(x, w, rows, cols, 1e-6), kRel, kAbs))
          << "rows " << rows << " cols " << cols;
    }
  }
}

TEST_P(NormTest, FusedAddNormIsBitIdenticalToAddThenNorm) {
  for (int64_t cols : test_cols()) {
    for (int64_t rows : {1, 3, 33}) {
      auto a = random_floats(rows * cols, 5 + cols), b = random_floats(rows * cols, 6 + cols);
      auto w = random_floats(cols, 7 + cols);
      std::vector<float> sum(rows * cols), norm(rows * cols);
      std::vector<float> sum2(rows * cols), norm2(rows * cols);
      add_rms_norm(a.data(), b.data(), w.data(), sum.data(), norm.data(), rows, cols, 1e-6f,
                   ExecContext{});
      add(a.data(), b.data(), sum2.data(), rows * cols, ExecContext{});
      rms_norm(sum2.data(), w.data(), norm2.data(), rows, cols, 1e-6f, ExecContext{});
      ASSERT_TRUE(bits_equal(sum, sum2)) << cols;
      ASSERT_TRUE(bits_equal(norm, norm2)) << cols;
      // sum_out may overwrite an input (the residual stream is updated in place).
      std::vector<float> a2 = a, norm3(rows * cols);
      add_rms_norm(a2.data(), b.data(), w.data(), a2.data(), norm3.data(), rows, cols, 1e-6f,
                   ExecContext{});
      ASSERT_TRUE(bits_equal(a2, sum2));
      ASSERT_TRUE(bits_equal(norm3, norm2));
    }
  }
}

TEST_P(NormTest, RowResultIndependentOfBatchThreadsAndAliasing) {
  const int64_t rows = 33, cols = 640;
  auto x = random_floats(rows * cols, 1);
  auto w = random_floats(cols, 2);
  std::vector<float> single(cols);
  rms_norm(x.data() + 7 * cols, w.data(), single.data(), 1, cols, 1e-6f, ExecContext{});
  for (int nth : {1, 2, 3}) {
    std::vector<float> out = x;
    run_group(nth, [&](const ExecContext& ctx) {
      rms_norm(out.data(), w.data(), out.data(), rows, cols, 1e-6f, ctx);
    });
    std::vector<float> row7(out.begin() + 7 * cols, out.begin() + 8 * cols);
    EXPECT_TRUE(bits_equal(row7, single)) << nth << " threads";
  }
}

std::vector<float> layer_norm_f64(const std::vector<float>& x, const std::vector<float>& w,
                                  const std::vector<float>& b, int64_t rows, int64_t cols,
                                  double eps) {
  std::vector<float> out(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x.data() + r * cols;
    double mean = 0, var = 0;
    for (int64_t c = 0; c < cols; ++c) mean += xr[c];
    mean /= cols;
    for (int64_t c = 0; c < cols; ++c) var += (xr[c] - mean) * (xr[c] - mean);
    const double inv = 1.0 / std::sqrt(var / cols + eps);
    for (int64_t c = 0; c < cols; ++c)
      out[r * cols + c] = float((xr[c] - mean) * inv * w[c] + b[c]);
  }
  return out;
}

TEST_P(NormTest, LayerNormMatchesFloat64Reference) {
  for (int64_t cols : test_cols()) {
    for (int64_t rows : {1, 2, 33}) {
      // An offset of a few standard deviations: a one-pass E[x^2] - E[x]^2 would cancel.
      // (Float rounding of the mean limits how far the offset can go before the reference,
      // in double, differs for any float implementation.)
      auto x = random_floats(rows * cols, 31 * cols + rows, 8.0f, 12.0f);
      auto w = random_floats(cols, 5 + cols, 0.5f, 1.5f);
      auto b = random_floats(cols, 9 + cols);
      std::vector<float> out(rows * cols);
      layer_norm(x.data(), w.data(), b.data(), out.data(), rows, cols, 1e-12f, ExecContext{});
      ASSERT_TRUE(all_close(out, layer_norm_f64(x, w, b, rows, cols, 1e-12), 2e-5, 2e-5))
          << "rows " << rows << " cols " << cols;
    }
  }
}

TEST_P(NormTest, LayerNormRowIndependentOfBatchThreadsAndAliasing) {
  const int64_t rows = 33, cols = 384;
  auto x = random_floats(rows * cols, 11), w = random_floats(cols, 12), b = random_floats(cols, 13);
  std::vector<float> single(cols);
  layer_norm(x.data() + 5 * cols, w.data(), b.data(), single.data(), 1, cols, 1e-12f,
             ExecContext{});
  for (int nth : {1, 2, 3}) {
    std::vector<float> out = x;
    run_group(nth, [&](const ExecContext& ctx) {
      layer_norm(out.data(), w.data(), b.data(), out.data(), rows, cols, 1e-12f, ctx);
    });
    std::vector<float> row5(out.begin() + 5 * cols, out.begin() + 6 * cols);
    EXPECT_TRUE(bits_equal(row5, single)) << nth << " threads";
  }
  EXPECT_THROW(layer_norm(x.data(), w.data(), b.data(), x.data(), 1, 0, 1e-6f, ExecContext{}),
               Error);
}

TEST_P(NormTest, BadShapeThrows) {
  std::vector<float> x(4);
  EXPECT_THROW(rms_norm(x.data(), x.data(), x.data(), 1, 0, 1e-6f, ExecContext{}), Error);
  EXPECT_THROW(rms_norm(x.data(), x.data(), x.data(), 1, 4, -1.0f, ExecContext{}), Error);
}

KILN_INSTANTIATE_ISA_TESTS(NormTest);

}  // namespace
}  // namespace kiln::kernels
