#include "kiln/server/metrics.h"

#include <gtest/gtest.h>

namespace kiln::server {
namespace {

TEST(Histogram, CumulativeBuckets) {
  Histogram h({0.1, 1.0});
  h.observe(0.05);
  h.observe(0.5);
  h.observe(0.5);
  h.observe(7);
  std::string out;
  h.render("x", "help", out);
  EXPECT_NE(out.find("x_bucket{le=\"0.1\"} 1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_bucket{le=\"1\"} 3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_bucket{le=\"+Inf\"} 4\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_count 4\n"), std::string::npos) << out;
  EXPECT_NE(out.find("x_sum 8.05\n"), std::string::npos) << out;
}

TEST(Metrics, RendersEngineGaugesAndHitRate) {
  Metrics m;
  m.request_finished(engine::FinishReason::Stop, 10, 5, 4, 0.2);
  engine::EngineStats s;
  s.kv_pages_total = 10;
  s.kv_pages_used = 3;
  s.prefix_cache_hit_tokens = 1;
  s.prefix_cache_query_tokens = 4;
  s.graph_steps = 7;
  s.mixed_steps = 5;
  auto text = m.render(s);
  EXPECT_NE(text.find("kiln_requests_total{finish_reason=\"stop\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("kiln_kv_pages_free 7\n"), std::string::npos);
  EXPECT_NE(text.find("kiln_prefix_cache_hit_rate 0.25\n"), std::string::npos);
  EXPECT_NE(text.find("kiln_graph_steps_total 7\n"), std::string::npos);
  EXPECT_NE(text.find("kiln_mixed_steps_total 5\n"), std::string::npos);
  EXPECT_NE(text.find("kiln_request_cached_tokens_total 4\n"), std::string::npos);
}

TEST(Metrics, RendersStepTimeByKind) {
  Metrics m;
  engine::EngineStats s;
  s.step_time[static_cast<size_t>(engine::StepKind::Mixed)] = {3, 120, 0.5};
  s.step_time[static_cast<size_t>(engine::StepKind::DecodeGraph)] = {9, 36, 0.25};
  const std::string text = m.render(s);
  for (const char* line :
       {"kiln_steps_total{kind=\"mixed\"} 3\n", "kiln_step_rows_total{kind=\"mixed\"} 120\n",
        "kiln_step_seconds_total{kind=\"mixed\"} 0.5\n",
        "kiln_steps_total{kind=\"decode_graph\"} 9\n",
        "kiln_step_rows_total{kind=\"decode_graph\"} 36\n",
        "kiln_step_seconds_total{kind=\"decode_graph\"} 0.25\n",
        "kiln_steps_total{kind=\"prefill\"} 0\n", "kiln_steps_total{kind=\"verify_eager\"} 0\n",
        "# TYPE kiln_step_seconds_total counter\n"})
    EXPECT_NE(text.find(line), std::string::npos) << line;
}

}  // namespace
}  // namespace kiln::server
