// What every route handler shares: the backend, the tokenizer, the model's facts, the options
// and the metrics. Owned by HttpServer; handlers get a reference.
#pragma once
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "kiln/server/backend.h"
#include "kiln/server/embedding_backend.h"
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
  // The chat page at `/` (webui_routes.h); false: `/` answers 404 naming --no-webui.
  bool webui = true;
  // Handler threads, started on demand up to this many (0: enough for max_n concurrent streams
  // plus headroom, see http_server.cc). Idle and slow connections hold none.
  int http_workers = 0;
  int http_io_threads = 1;              // threads carrying every connection's I/O
  size_t max_body_bytes = 16u << 20;    // larger bodies get 413
  size_t max_header_bytes = 64u << 10;  // larger request heads get 431
  // A request's header must be in this long after the server starts waiting for it (which also
  // closes idle keep-alive connections); then its body within body_timeout; each response
  // write within write_timeout.
  std::chrono::milliseconds header_timeout{10000};
  std::chrono::milliseconds body_timeout{60000};
  std::chrono::milliseconds write_timeout{60000};
  int64_t max_prompt_tokens = 0;  // 0: the context length is the only limit
  int max_n = 64;                 // samples per prompt (n)
  int max_batch_prompts = 1024;   // prompts in one batch request
  // n x prompts of one request; `kiln serve` sets the engine's queue size (request_builder.h).
  int64_t max_request_sequences = 1024;
  nlohmann::json server_args;  // echoed by /get_server_info
};

struct ServerState {
  ServerState(GenerationBackend& b, const TextCodec& c, ModelCard m, ServerOptions o)
      : backend(b), codec(c), model(std::move(m)), options(std::move(o)) {}
  GenerationBackend& backend;
  const TextCodec& codec;
  // Set when the loaded model embeds (/v1/embeddings, /encode); null: those routes answer 404.
  EmbeddingBackend* embeddings = nullptr;
  ModelCard model;
  ServerOptions options;
  // Shared: engine callbacks count finished requests and may outlive a late HTTP request.
  std::shared_ptr<Metrics> metrics = std::make_shared<Metrics>();
  std::atomic<int> active_generations{0};  // HTTP requests with a job in flight
  std::atomic<bool> stopping{false};
  // Set by HttpServer::stop_accepting (a draining shutdown): streams end with "abort", and
  // responses close their connection.
  std::atomic<bool> draining{false};

  ParseLimits parse_limits() const {
    ParseLimits l;
    l.vocab_size = codec.vocab_size();
    l.max_n = options.max_n;
    l.tool_calls = codec.tool_call_format();
    return l;
  }
  PromptLimits prompt_limits() const {
    return {model.context_length, options.max_prompt_tokens, codec.max_token_bytes()};
  }
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
