// The engine's configuration (EngineConfig, SpeculativeConfig), its statistics (EngineStats) and
// QueueFull: what the engine, its scheduler and the server share, apart from the Engine class
// (engine.h), so that each of them depends on these types and not on one another.
#pragma once
#include <array>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>

#include "kiln/engine/ngram_proposer.h"
#include "kiln/engine/schedule_policy.h"

namespace kiln::engine {

// Speculative decoding (docs/speculative-decoding.md): proposed tokens verified in one step,
// keeping only what plain decoding would have produced (greedy requests: the same tokens).
// Plain data: the draft model's executor and pool, and tests' fake step costs, are passed to
// the engine beside it (SpeculativeResources, speculative_resources.h).
struct SpeculativeConfig {
  static constexpr int kMaxDraftTokens = 16;
  bool ngram = false;  // --speculative-algorithm ngram: prompt lookup, no draft model
  // --speculative-algorithm standalone: proposals from a draft model (the engine is given its
  // executor and KV pool in SpeculativeResources).
  bool draft_model = false;
  int num_draft_tokens = 4;  // most tokens proposed per request and step, [1, kMaxDraftTokens]
  NgramProposerConfig ngram_match{.min_match = 2, .max_match = 12};
  // Speculate only while at most this many requests decode: a larger batch already reads each
  // weight for many rows, and verifying proposals would cost compute it has no room for.
  int max_batch = 4;
  bool enabled() const { return ngram || draft_model; }
};

struct EngineConfig {
  int max_running_requests = 64;   // decode batch cap
  int max_queued_requests = 1024;  // beyond: submit() throws QueueFull
  int chunked_prefill_size = 512;  // prompt tokens per prefill chunk
  int max_prefill_tokens = 2048;   // prompt tokens per step over all prefills
  // While requests are decoding, a prefill step takes at most this many prompt tokens (0: no
  // cap beyond max_prefill_tokens): decode rows wait for one prefill step between tokens, so
  // this bounds the inter-token latency that prompts arriving mid-generation add.
  int max_prefill_tokens_while_decoding = 256;
  // While requests decode and prompts wait, each step carries both: every decoding request's
  // next token and a prefill chunk (scheduler.h). Off: prefill and decode steps alternate.
  bool mixed_steps = true;
  bool enable_prefix_cache = true;
  // The order of admission and preemption: fcfs or lpm, priorities, the bounded wait
  // (schedule_policy.h).
  ScheduleConfig schedule;
  int max_context = 0;  // 0: the model's
  // Seeds the engine RNG that seeds requests without a seed of their own; none: random.
  std::optional<uint64_t> random_seed;
  SpeculativeConfig speculative;
};

// What forward steps did, by kind: where a serving run's step time goes (prompt rows alone,
// prompt rows with decode rows riding along, decode or verify steps from a captured plan or
// interpreted).
enum class StepKind : uint8_t {
  Prefill,
  Mixed,
  DecodeGraph,
  DecodeEager,
  VerifyGraph,
  VerifyEager
};
inline constexpr int kNumStepKinds = 6;
// "prefill", "mixed", "decode_graph", ... (the label of kiln_step_seconds_total).
inline const char* step_kind_name(StepKind kind) {
  static constexpr const char* kNames[kNumStepKinds] = {
      "prefill", "mixed", "decode_graph", "decode_eager", "verify_graph", "verify_eager"};
  return kNames[static_cast<size_t>(kind)];
}

struct StepTime {
  int64_t steps = 0;
  int64_t rows = 0;    // tokens the steps computed (prompt, decode and verify rows)
  double seconds = 0;  // wall time of the forward passes
};

struct EngineStats {
  int64_t queued = 0;
  int64_t running = 0;
  int64_t kv_pages_total = 0;
  int64_t kv_pages_used = 0;    // held by running requests or the prefix cache
  int64_t kv_pages_cached = 0;  // held only by the prefix cache (evictable)
  int64_t prefix_cache_hit_tokens = 0;
  int64_t prefix_cache_query_tokens = 0;
  int64_t requests_finished = 0;
  int64_t prompt_tokens_total = 0;
  int64_t generated_tokens_total = 0;
  int64_t graph_steps = 0;
  int64_t eager_steps = 0;
  int64_t mixed_steps = 0;  // steps that carried decode rows and prompt rows together
  int64_t preemptions = 0;
  // Speculative decoding: steps that verified proposals, tokens proposed and accepted, and how
  // many steps accepted 0, 1, ... kMaxDraftTokens proposals of a request.
  int64_t spec_verify_steps = 0;
  int64_t spec_proposed_tokens = 0;
  int64_t spec_accepted_tokens = 0;
  std::array<int64_t, SpeculativeConfig::kMaxDraftTokens + 1> spec_accept_histogram{};
  std::array<StepTime, kNumStepKinds> step_time{};  // indexed by StepKind
  // JSON constraints' token masks: looked up in the mask cache (hits), walked over the
  // vocabulary (misses), and the seconds steps waited for them after the forward pass.
  int64_t json_mask_hits = 0;
  int64_t json_mask_misses = 0;
  double json_mask_wait_seconds = 0;
};

// The engine cannot take the request now (the server answers 503: retry later).
class QueueFull : public std::runtime_error {
 public:
  QueueFull() : std::runtime_error("the request queue is full") {}
  explicit QueueFull(const std::string& why) : std::runtime_error(why) {}
};

}  // namespace kiln::engine
