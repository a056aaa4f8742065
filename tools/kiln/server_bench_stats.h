// Serving benchmark statistics as SGLang's bench_serving defines them: TTFT is the time to the
// first streamed chunk with output, ITL the gaps between later chunks (pooled over requests),
// TPOT (latency - TTFT) / (output tokens - 1) per request with more than one token, and
// throughputs over the wall time of the whole run.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kiln::cli {

struct ServingRequestRecord {
  bool success = false;
  std::string error;
  int prompt_len = 0;
  int output_len = 0;
  int cached_len = 0;  // prompt tokens the server's prefix cache served
  double ttft = 0;     // seconds
  double latency = 0;  // seconds
  std::vector<double> itl;
};

struct LatencySummary {
  double mean = 0, median = 0, p99 = 0, std = 0, max = 0;
};
// Percentiles with linear interpolation (numpy's default); zeros for an empty input.
LatencySummary summarize(std::vector<double> values);

struct ServingResult {
  int completed = 0;
  int failed = 0;
  double duration = 0;
  int64_t total_input = 0;
  int64_t total_output = 0;
  int64_t total_cached = 0;
  double prefix_cache_hit_rate = 0;  // total_cached / total_input
  double request_throughput = 0, input_throughput = 0, output_throughput = 0;
  double concurrency = 0;  // mean requests in flight: sum of latencies / duration
  LatencySummary e2e_ms, ttft_ms, tpot_ms, itl_ms;
};

ServingResult compute_serving_result(const std::vector<ServingRequestRecord>& records,
                                     double duration);
nlohmann::json serving_result_json(const ServingResult& r);
std::string format_serving_result(const ServingResult& r, const std::string& backend,
                                  const std::string& rate, const std::string& concurrency);

}  // namespace kiln::cli
