// The scheduler's record of one request, shared by the files that implement Scheduler
// (scheduler.cc: admission, memory and steps; scheduler_outputs.cc: a step's outputs and the
// JSON constraint; scheduler_speculation.cc: proposals and their verification). Internal to
// the engine layer.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/engine/json/json_matcher.h"
#include "kiln/engine/radix_cache.h"
#include "kiln/engine/request.h"
#include "kiln/engine/sampler.h"
#include "kiln/engine/schedule_policy.h"
#include "kiln/engine/speculation_policy.h"
#include "kiln/engine/stop_checker.h"
#include "kiln/engine/token_text.h"

namespace kiln::engine {

// One request inside the scheduler. tokens = prompt + generated; K/V exists for the first
// n_kv of them. While running, pages[] covers every position the request will compute before
// it next needs a page; its first n_cached_pages pages belong to the prefix cache (pinned
// through `node`), the rest to the request.
struct Sequence {
  enum class State { Waiting, Prefilling, Decoding };

  uint64_t id = 0;
  ScheduleTicket ticket;  // arrival, priority, and how often newer requests overtook it
  GenerateRequest request;
  EventCallback on_event;
  std::vector<int32_t> tokens;
  int64_t n_prompt = 0;
  int64_t n_kv = 0;
  std::vector<int32_t> pages;
  size_t n_cached_pages = 0;
  RadixCache::Node* node = nullptr;
  State state = State::Waiting;
  Sampler sampler;
  StopChecker stop;
  // JSON-constrained requests: where the output stands in the schema, and the ids that may end
  // it once the value is complete (end-of-generation ids and the request's stop ids).
  std::optional<JsonMatcher> json;
  std::vector<int32_t> json_end_ids;
  // With sampling.json_after: the output's last bytes while no value is open (where the marker
  // is looked for).
  std::string json_tail;
  int cached_tokens = -1;  // prompt tokens served by the prefix cache on first admission
  // Prompt scoring: positions [score_from, n_prompt) get a logprob each; scores[i] is
  // position score_from + i's. They survive preemption, so no position is scored twice.
  int64_t score_from = 0;
  std::vector<TokenLogprob> scores;
  bool scores_sent = false;
  // Speculative decoding: this step's proposals (empty: a plain decode row), the most it may
  // propose next (halved on a miss, doubled when all are accepted), steps to sit out after
  // misses, and the counts reported with the request.
  std::vector<int32_t> draft;
  int draft_limit = SpeculativeConfig::kMaxDraftTokens;
  int draft_misses = 0;
  int draft_skip = 0;
  int spec_verify_ct = 0;
  int spec_proposed = 0;
  int spec_accepted = 0;
  SpecRuns spec_runs;  // for the speculation policy

  Sequence(uint64_t id_, uint64_t arrival_, GenerateRequest req, EventCallback cb, uint64_t seed,
           const TokenText& tokenizer, std::span<const int32_t> eog_ids)
      : id(id_),
        ticket{.arrival = arrival_, .priority = req.priority},
        request(std::move(req)),
        on_event(std::move(cb)),
        sampler(request.sampling, request.sampling.seed.value_or(seed), request.logprobs),
        stop(request.stop, tokenizer, request.skip_special_tokens, eog_ids) {
    tokens = request.prompt_ids;
    n_prompt = static_cast<int64_t>(tokens.size());
    sampler.add_prompt(tokens);
    if (request.sampling.json_schema) {
      if (request.sampling.json_after.empty()) {
        json.emplace(request.sampling.json_schema, request.sampling.json_leading_space);
      }
      json_end_ids.assign(eog_ids.begin(), eog_ids.end());
      json_end_ids.insert(json_end_ids.end(), request.stop.stop_token_ids.begin(),
                          request.stop.stop_token_ids.end());
    }
    score_from = request.prompt_logprobs_from < 0
                     ? n_prompt
                     : std::max<int64_t>(request.prompt_logprobs_from, 1);
  }
  int64_t generated() const { return static_cast<int64_t>(tokens.size()) - n_prompt; }
  // Prompt positions still to score; the next one needs the logits of the row before it.
  bool scoring() const { return score_from + static_cast<int64_t>(scores.size()) < n_prompt; }
  int64_t next_scoring_row() const { return score_from + static_cast<int64_t>(scores.size()) - 1; }
};

inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace kiln::engine
