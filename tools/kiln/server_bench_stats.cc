#include "server_bench_stats.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "order_stats.h"

namespace kiln::cli {

namespace {

LatencySummary to_ms(LatencySummary s) {
  return {s.mean * 1e3, s.median * 1e3, s.p99 * 1e3, s.std * 1e3, s.max * 1e3};
}

}  // namespace

LatencySummary summarize(std::vector<double> v) {
  LatencySummary s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  double var = 0;
  for (double x : v) var += (x - s.mean) * (x - s.mean);
  s.std = std::sqrt(var / static_cast<double>(v.size()));
  s.median = quantile_of_sorted(v, 0.5);
  s.p99 = quantile_of_sorted(v, 0.99);
  s.max = v.back();
  return s;
}

ServingResult compute_serving_result(const std::vector<ServingRequestRecord>& records,
                                     double duration) {
  ServingResult r;
  r.duration = duration;
  std::vector<double> e2e, ttft, tpot, itl;
  double latency_sum = 0;
  for (const auto& rec : records) {
    if (!rec.success) {
      ++r.failed;
      continue;
    }
    ++r.completed;
    r.total_input += rec.prompt_len;
    r.total_output += rec.output_len;
    r.total_cached += rec.cached_len;
    e2e.push_back(rec.latency);
    ttft.push_back(rec.ttft);
    latency_sum += rec.latency;
    if (rec.output_len > 1) tpot.push_back((rec.latency - rec.ttft) / (rec.output_len - 1));
    itl.insert(itl.end(), rec.itl.begin(), rec.itl.end());
  }
  if (duration > 0) {
    r.request_throughput = r.completed / duration;
    r.input_throughput = static_cast<double>(r.total_input) / duration;
    r.output_throughput = static_cast<double>(r.total_output) / duration;
    r.concurrency = latency_sum / duration;
  }
  if (r.total_input > 0) {
    r.prefix_cache_hit_rate =
        static_cast<double>(r.total_cached) / static_cast<double>(r.total_input);
  }
  r.e2e_ms = to_ms(summarize(e2e));
  r.ttft_ms = to_ms(summarize(ttft));
  r.tpot_ms = to_ms(summarize(tpot));
  r.itl_ms = to_ms(summarize(itl));
  return r;
}

nlohmann::json serving_result_json(const ServingResult& r) {
  auto s = [](const LatencySummary& x) {
    return nlohmann::json{
        {"mean", x.mean}, {"median", x.median}, {"p99", x.p99}, {"std", x.std}, {"max", x.max}};
  };
  return {{"completed", r.completed},
          {"failed", r.failed},
          {"duration", r.duration},
          {"total_input_tokens", r.total_input},
          {"total_output_tokens", r.total_output},
          {"total_cached_tokens", r.total_cached},
          {"prefix_cache_hit_rate", r.prefix_cache_hit_rate},
          {"request_throughput", r.request_throughput},
          {"input_throughput", r.input_throughput},
          {"output_throughput", r.output_throughput},
          {"concurrency", r.concurrency},
          {"e2e_latency_ms", s(r.e2e_ms)},
          {"ttft_ms", s(r.ttft_ms)},
          {"tpot_ms", s(r.tpot_ms)},
          {"itl_ms", s(r.itl_ms)}};
}

std::string format_serving_result(const ServingResult& r, const std::string& backend,
                                  const std::string& rate, const std::string& concurrency) {
  std::string out;
  auto line = [&](const std::string& k, const std::string& v) {
    out += fmt::format("{:<40} {:<10}\n", k, v);
  };
  auto num = [](double x) { return fmt::format("{:.2f}", x); };
  auto section = [&](const std::string& title) { out += fmt::format("{:-^50}\n", title); };
  out += fmt::format("{:=^50}\n", " Serving Benchmark Result ");
  line("Backend:", backend);
  line("Traffic request rate:", rate);
  line("Max request concurrency:", concurrency);
  line("Successful requests:", std::to_string(r.completed));
  line("Failed requests:", std::to_string(r.failed));
  line("Benchmark duration (s):", num(r.duration));
  line("Total input tokens:", std::to_string(r.total_input));
  line("Total generated tokens:", std::to_string(r.total_output));
  line("Prefix cache hit rate:", fmt::format("{:.1f}%", 100.0 * r.prefix_cache_hit_rate));
  line("Request throughput (req/s):", num(r.request_throughput));
  line("Input token throughput (tok/s):", num(r.input_throughput));
  line("Output token throughput (tok/s):", num(r.output_throughput));
  line("Total token throughput (tok/s):", num(r.input_throughput + r.output_throughput));
  line("Concurrency:", num(r.concurrency));
  section("End-to-End Latency");
  line("Mean E2E Latency (ms):", num(r.e2e_ms.mean));
  line("Median E2E Latency (ms):", num(r.e2e_ms.median));
  section("Time to First Token");
  line("Mean TTFT (ms):", num(r.ttft_ms.mean));
  line("Median TTFT (ms):", num(r.ttft_ms.median));
  line("P99 TTFT (ms):", num(r.ttft_ms.p99));
  section("Time per Output Token (excl. 1st token)");
  line("Mean TPOT (ms):", num(r.tpot_ms.mean));
  line("Median TPOT (ms):", num(r.tpot_ms.median));
  line("P99 TPOT (ms):", num(r.tpot_ms.p99));
  section("Inter-Token Latency");
  line("Mean ITL (ms):", num(r.itl_ms.mean));
  line("Median ITL (ms):", num(r.itl_ms.median));
  line("P99 ITL (ms):", num(r.itl_ms.p99));
  line("Max ITL (ms):", num(r.itl_ms.max));
  out += std::string(50, '=') + "\n";
  return out;
}

}  // namespace kiln::cli
