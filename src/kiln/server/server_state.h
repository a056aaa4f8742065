// What every route handler shares: the backend, the tokenizer, the model's facts, the options
// and the metrics. Owned by HttpServer; handlers get a reference.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "kiln/server/backend.h"
#include "kiln/server/metrics.h"
#include "kiln/server/parsed_requests.h"
#include "kiln/server/request_builder.h"

namespace kiln::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 30000;     // 0: any free port (HttpServer::bind returns it)
  std::string api_key;  // non-empty: every route but /health needs "Authorization: Bearer <key>"
  // Non-empty: responses carry Access-Control-Allow-Origin with this value ("*" or an origin),
  // so browser pages from there may read them. Preflights are answered either way (cors.h).
  std::string cors_allow_origin;
  int http_workers =
      0;  // 0: enough for max_n concurrent streams plus headroom (see http_server.cc)
  size_t max_body_bytes = 16u << 20;  // larger bodies get 413
  int64_t max_prompt_tokens = 0;      // 0: the context length is the only limit
  int max_n = 64;                     // samples per prompt (n)
  int max_batch_prompts = 1024;       // prompts in one batch request
  // n x prompts of one request; `kiln serve` sets the engine's queue size (request_builder.h).
  int64_t max_request_sequences = 1024;
  nlohmann::json server_args;  // echoed by /get_server_info
};

struct ServerState {
  ServerState(GenerationBackend& b, const TextCodec& c, ModelCard m, ServerOptions o)
      : backend(b), codec(c), model(std::move(m)), options(std::move(o)) {}
  GenerationBackend& backend;
  const TextCodec& codec;
  ModelCard model;
  ServerOptions options;
  // Shared: engine callbacks count finished requests and may outlive a late HTTP request.
  std::shared_ptr<Metrics> metrics = std::make_shared<Metrics>();
  std::atomic<int> active_generations{0};  // HTTP requests with a job in flight
  std::atomic<bool> stopping{false};

  ParseLimits parse_limits() const {
    ParseLimits l;
    l.vocab_size = codec.vocab_size();
    l.max_n = options.max_n;
    return l;
  }
  PromptLimits prompt_limits() const { return {model.context_length, options.max_prompt_tokens}; }
};

// Counts a generation as active for its lifetime (HttpServer::wait_idle waits on it).
class ActiveGeneration {
 public:
  explicit ActiveGeneration(ServerState& s) : s_(s) { s_.active_generations.fetch_add(1); }
  ~ActiveGeneration() { s_.active_generations.fetch_sub(1); }
  ActiveGeneration(const ActiveGeneration&) = delete;
  ActiveGeneration& operator=(const ActiveGeneration&) = delete;

 private:
  ServerState& s_;
};

}  // namespace kiln::server
