// `kiln perplexity`'s arithmetic: log-sum-exp of a logits row and llama-perplexity's estimate
// of the perplexity's uncertainty.
#include "perplexity_scoring.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace kiln::cli {
namespace {

TEST(PerplexityScoring, LogSumExpIsStableForLargeLogits) {
  const std::vector<float> row = {0.0f, std::log(3.0f)};
  EXPECT_NEAR(log_sum_exp(row.data(), 2), std::log(4.0), 1e-6);
  // exp(1000) overflows a double: the maximum must be taken out first.
  const std::vector<float> big = {1000.0f, 1000.0f};
  EXPECT_NEAR(log_sum_exp(big.data(), 2), 1000.0 + std::log(2.0), 1e-9);
}

TEST(PerplexityScoring, PerplexityAndItsUncertainty) {
  NllAccumulator acc;
  EXPECT_EQ(acc.count(), 0);
  for (double lp : {-1.0, -2.0, -3.0}) acc.add(lp);
  EXPECT_EQ(acc.count(), 3);
  EXPECT_DOUBLE_EQ(acc.mean_nll(), 2.0);
  EXPECT_NEAR(acc.ppl(), std::exp(2.0), 1e-12);
  // var(nll) = 14/3 - 4 = 2/3 over count - 1 = 2 samples' worth: ppl * sqrt(1/3).
  EXPECT_NEAR(acc.ppl_error(), std::exp(2.0) * std::sqrt(1.0 / 3.0), 1e-9);
}

}  // namespace
}  // namespace kiln::cli
