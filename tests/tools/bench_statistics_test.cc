// The statistics every `kiln bench` report prints: quantiles, and serving figures as SGLang's
// bench_serving defines them. Expected values are numpy's (np.quantile / np.percentile with
// linear interpolation, np.std), computed once by hand and written here.
#include <gtest/gtest.h>

#include "order_stats.h"
#include "server_bench_stats.h"

namespace kiln::cli {
namespace {

TEST(OrderStats, QuantilesInterpolateLikeNumpy) {
  EXPECT_DOUBLE_EQ(median({4.0, 1.0, 3.0, 2.0}), 2.5);
  EXPECT_DOUBLE_EQ(quantile({4.0, 1.0, 3.0, 2.0}, 0.25), 1.75);
  EXPECT_DOUBLE_EQ(quantile({4.0, 1.0, 3.0, 2.0}, 0.9), 3.7);
  EXPECT_DOUBLE_EQ(median({7.0}), 7.0);
  EXPECT_DOUBLE_EQ(median({}), 0.0);
  EXPECT_DOUBLE_EQ(quantile_of_sorted({1.0, 2.0, 3.0}, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(quantile_of_sorted({1.0, 2.0, 3.0}, 1.0), 3.0);
}

TEST(ServingStats, SummaryMatchesNumpy) {
  const LatencySummary s = summarize({0.5, 3.0, 1.0, 2.0, 10.0});
  EXPECT_DOUBLE_EQ(s.mean, 3.3);
  EXPECT_DOUBLE_EQ(s.median, 2.0);
  EXPECT_NEAR(s.p99, 9.72, 1e-12);
  EXPECT_NEAR(s.std, 3.4583232931581165, 1e-12);  // population std, numpy's default
  EXPECT_DOUBLE_EQ(s.max, 10.0);
  const LatencySummary empty = summarize({});
  EXPECT_EQ(empty.mean, 0.0);
  EXPECT_EQ(empty.max, 0.0);
}

TEST(ServingStats, ThroughputsLatenciesAndFailures) {
  std::vector<ServingRequestRecord> records(3);
  records[0] = {true, "", 100, 11, 40, 0.5, 2.5, {0.2, 0.2}};
  records[1] = {true, "", 50, 1, 0, 0.25, 0.25, {}};
  records[2] = {false, "HTTP 503", 70, 0, 0, 0, 0, {}};
  const ServingResult r = compute_serving_result(records, 5.0);
  EXPECT_EQ(r.completed, 2);
  EXPECT_EQ(r.failed, 1);
  EXPECT_EQ(r.total_input, 150);  // the failed request's prompt is not counted
  EXPECT_EQ(r.total_output, 12);
  EXPECT_DOUBLE_EQ(r.request_throughput, 0.4);
  EXPECT_DOUBLE_EQ(r.input_throughput, 30.0);
  EXPECT_DOUBLE_EQ(r.output_throughput, 2.4);
  EXPECT_DOUBLE_EQ(r.concurrency, 0.55);  // (2.5 + 0.25) / 5
  EXPECT_DOUBLE_EQ(r.prefix_cache_hit_rate, 40.0 / 150.0);
  // TPOT only over requests with more than one token: (2.5 - 0.5) / 10.
  EXPECT_DOUBLE_EQ(r.tpot_ms.mean, 200.0);
  EXPECT_DOUBLE_EQ(r.ttft_ms.mean, 375.0);
  EXPECT_DOUBLE_EQ(r.itl_ms.median, 200.0);
  EXPECT_DOUBLE_EQ(r.e2e_ms.max, 2500.0);
}

}  // namespace
}  // namespace kiln::cli
