// Prometheus metrics for GET /metrics. Latencies the HTTP layer observes (time to first token,
// inter-token latency, end-to-end latency) and finished requests by reason are recorded here as
// they happen; engine state (queue, batch, KV pages, prefix cache, graph vs eager steps) is read
// from engine::EngineStats when the page is rendered.
#pragma once
#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "kiln/engine/engine_config.h"
#include "kiln/engine/request.h"

namespace kiln::server {

// A cumulative histogram with fixed upper bounds (seconds), as Prometheus expects.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  // Appends the _bucket/_sum/_count lines for `name`.
  void render(const std::string& name, const std::string& help, std::string& out) const;
  uint64_t count() const;

 private:
  mutable std::mutex mu_;
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); last is +Inf
  double sum_ = 0;
  uint64_t total_ = 0;
};

class Metrics {
 public:
  Metrics();
  void observe_ttft(double seconds) { ttft_.observe(seconds); }
  void observe_itl(double seconds) { itl_.observe(seconds); }
  void request_finished(engine::FinishReason reason, int prompt_tokens, int completion_tokens,
                        int cached_tokens, double e2e_seconds);
  void http_request(int status);

  // The whole exposition text.
  std::string render(const engine::EngineStats& stats) const;

 private:
  Histogram ttft_;
  Histogram itl_;
  Histogram e2e_;
  mutable std::mutex mu_;
  std::array<uint64_t, 4> finished_by_reason_{};  // indexed by FinishReason
  uint64_t prompt_tokens_ = 0;
  uint64_t completion_tokens_ = 0;
  uint64_t cached_tokens_ = 0;
  uint64_t http_2xx_ = 0, http_4xx_ = 0, http_5xx_ = 0;
};

// "stop" | "length" | "abort" ("none" for an unfinished request).
const char* finish_reason_string(engine::FinishReason r);

}  // namespace kiln::server
