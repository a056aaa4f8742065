#include "kiln/kernels/reduce.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "kernel_test_util.h"
#include "kiln/base/error.h"

namespace kiln::kernels {
namespace {

using testing::all_close;
using testing::random_floats;
using testing::run_group;

const float kInf = std::numeric_limits<float>::infinity();

int32_t argmax_ref(const float* x, int64_t n) {
  int32_t best = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) continue;
    if (best < 0 || x[i] > x[best]) best = static_cast<int32_t>(i);
  }
  return best < 0 ? 0 : best;
}

std::vector<int32_t> top_k_ref(const std::vector<float>& x, int64_t k) {
  std::vector<int32_t> idx(x.size());
  std::iota(idx.begin(), idx.end(), 0);
  auto key = [&](int32_t i) { return std::isnan(x[i]) ? -kInf : x[i]; };
  std::stable_sort(idx.begin(), idx.end(), [&](int32_t a, int32_t b) { return key(a) > key(b); });
  idx.resize(k);
  return idx;
}

class ReduceTest : public testing::IsaTest {};

TEST_P(ReduceTest, ArgmaxMatchesReferenceWithTiesAndNaN) {
  for (int64_t cols : {1, 2, 7, 15, 16, 17, 31, 33, 64, 67, 640, 1000, 262144}) {
    for (int64_t rows : {1, 3, 33}) {
      if (cols == 262144 && rows > 3) continue;
      // Few distinct values: many ties.
      auto x = random_floats(rows * cols, cols * 7 + rows, -4.0f, 4.0f);
      for (auto& v : x) v = std::round(v);
      if (cols > 5) {
        x[3] = std::nanf("");
        x[cols - 1] = 4.0f;  // a late tie must not win
      }
      std::vector<int32_t> out(rows);
      run_group(
          2, [&](const ExecContext& ctx) { argmax_rows(x.data(), rows, cols, out.data(), ctx); });
      for (int64_t r = 0; r < rows; ++r)
        ASSERT_EQ(out[r], argmax_ref(x.data() + r * cols, cols)) << rows << "x" << cols;
    }
  }
  std::vector<float> special = {std::nanf(""), -kInf, -kInf, std::nanf("")};
  int32_t out = -1;
  argmax_rows(special.data(), 1, 4, &out, ExecContext{});
  EXPECT_EQ(out, 1);
  special = {std::nanf(""), std::nanf("")};
  argmax_rows(special.data(), 1, 2, &out, ExecContext{});
  EXPECT_EQ(out, 0);
}

TEST_P(ReduceTest, SoftmaxMatchesFloat64) {
  for (int64_t n : {1, 2, 15, 16, 17, 67, 1000, 262144}) {
    auto x = random_floats(n, n, -20.0f, 20.0f);
    if (n > 4) x[2] = -kInf;
    std::vector<double> e(n);
    double m = *std::max_element(x.begin(), x.end()), sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += e[i] = std::exp(double(x[i]) - m);
    std::vector<float> want(n);
    for (int64_t i = 0; i < n; ++i) want[i] = float(e[i] / sum);
    softmax_inplace(x.data(), n);
    // Float exp (few ulp) and float sum over up to 262144 terms: 2e-5 relative.
    ASSERT_TRUE(all_close(x, want, 2e-5, 1e-12)) << n;
    if (n > 4) {
      EXPECT_EQ(x[2], 0.0f);
    }
  }
  std::vector<float> bad = {-kInf, -kInf};
  EXPECT_THROW(softmax_inplace(bad.data(), 2), Error);
}

TEST_P(ReduceTest, TopKMatchesStableSort) {
  for (int64_t n : {1, 5, 17, 100, 1000, 262144}) {
    for (int64_t k : {1, 2, 5, 40, 1000}) {
      if (k > n) continue;
      auto x = random_floats(n, n + k, -8.0f, 8.0f);
      for (size_t i = 0; i < x.size(); i += 3) x[i] = std::round(x[i]);  // ties
      if (n > 10) {
        x[4] = std::nanf("");
        x[7] = -kInf;
      }
      std::vector<int32_t> got(k);
      top_k(x.data(), n, k, got.data());
      ASSERT_EQ(got, top_k_ref(x, k)) << "n " << n << " k " << k;
    }
  }
  // Ascending input: every element enters the heap.
  std::vector<float> asc(300);
  std::iota(asc.begin(), asc.end(), 0.0f);
  std::vector<int32_t> got(10);
  top_k(asc.data(), 300, 10, got.data());
  EXPECT_EQ(got, top_k_ref(asc, 10));
  EXPECT_THROW(top_k(asc.data(), 300, 0, got.data()), Error);
  EXPECT_THROW(top_k(asc.data(), 3, 4, got.data()), Error);
}

KILN_INSTANTIATE_ISA_TESTS(ReduceTest);

}  // namespace
}  // namespace kiln::kernels
