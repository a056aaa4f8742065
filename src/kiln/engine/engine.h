// The serving engine: a scheduler thread that owns the model executor, the KV pool and the
// radix prefix cache, and runs continuous batching (docs/architecture.md, Terms: "Engine").
// Thread-safe: the HTTP server's workers call submit/cancel/stats from any thread.
#pragma once
#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/engine/engine_config.h"
#include "kiln/engine/request.h"
#include "kiln/engine/speculative_resources.h"
#include "kiln/engine/token_text.h"

namespace kiln::model {
class Tokenizer;
}

namespace kiln::engine {

class KvPool;

class Engine {
 public:
  // Starts the scheduler thread. The executor and pool must outlive the engine, and so must
  // the draft model in `speculative` (config.speculative.draft_model).
  Engine(ModelExecutor& executor, KvPool& pool, const model::Tokenizer& tokenizer,
         const EngineConfig& config, const SpeculativeResources& speculative = {});
  // The same over the engine's own tokenizer interface (tests use a fake vocabulary). The
  // tokenizer must outlive the engine.
  Engine(ModelExecutor& executor, KvPool& pool, const TokenText& tokenizer,
         const EngineConfig& config, const SpeculativeResources& speculative = {});
  ~Engine();  // shutdown(), then joins
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request; events arrive on `on_event` (the last has finished=true; exactly one
  // such event per request, also for aborts and shutdown). Throws kiln::Error for an invalid
  // request (empty prompt, prompt + max_new_tokens over the context, bad sampling params) and
  // QueueFull when the queue is full.
  uint64_t submit(GenerateRequest request, EventCallback on_event);
  // Embeddings from the model's own hidden states (the final norm's output): one vector per
  // input (token ids), the last row's (mean: the mean over every row), L2-normalized when
  // `normalize`; row-major [inputs, hidden]. Each input runs as a request of its own whose
  // prompt rows are scheduled like any prompt's: admitted as pages allow, chunked, and mixed
  // into the same steps as the running generations' decode rows (request.h's HiddenOutput).
  // Blocks until every input is done. Throws kiln::Error for an empty input, one over the
  // context or the pool, or outside the vocabulary (before anything runs), and QueueFull when
  // the queue cannot take them all (nothing is left queued).
  std::vector<float> embed(const std::vector<std::vector<int32_t>>& inputs, bool mean,
                           bool normalize);
  // Aborts a queued or running request (client disconnect); its pages return to the pool.
  void cancel(uint64_t request_id);
  // Drops every prefix-cache entry not in use. Returns false if requests are running.
  bool flush_cache();
  EngineStats stats() const;
  // Aborts everything in flight (finish_reason abort) and stops the scheduler thread.
  void shutdown();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::engine
