#include "kiln/kernels/reduce.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernel_test_util.h"
#include "kiln/base/error.h"

namespace kiln::kernels {
namespace {

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

KILN_INSTANTIATE_ISA_TESTS(ReduceTest);

}  // namespace
}  // namespace kiln::kernels
