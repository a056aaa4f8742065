// The scheduler's record of one request, shared by the units it composes: the scheduler
// (admission, memory, steps), the token emitter (a step's tokens and events), the speculation
// unit (proposals and their acceptance) and the constraint cursor (the JSON constraint). Each
// of them can be tested on a Sequence built without a model. Internal to the engine layer.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/engine/json/constraint_cursor.h"
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
  // The constraint (none unless sampling.json_schema or sampling.grammar): where the output
  // stands in it.
  ConstraintCursor json;
  int cached_tokens = -1;  // prompt tokens served by the prefix cache on first admission
  // Prompt scoring: positions [score_from, n_prompt) get a logprob each; scores[i] is
  // position score_from + i's. They survive preemption, so no position is scored twice.
  int64_t score_from = 0;
  std::vector<TokenLogprob> scores;
  bool scores_sent = false;
  RequestSpeculation spec;  // speculative decoding: proposals, backoff, counts
  // An embedding request (request.hidden): the last row's hidden state, or the sum of the rows'
  // for positions [0, hidden_positions); it survives preemption, so no position counts twice.
  std::vector<double> hidden;
  int64_t hidden_positions = 0;

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
      std::vector<int32_t> end_ids(eog_ids.begin(), eog_ids.end());
      end_ids.insert(end_ids.end(), request.stop.stop_token_ids.begin(),
                     request.stop.stop_token_ids.end());
      json = ConstraintCursor(request.sampling.json_schema, request.sampling.json_after,
                              request.sampling.json_leading_space, request.skip_special_tokens,
                              std::move(end_ids));
    } else if (request.sampling.grammar) {
      std::vector<int32_t> end_ids(eog_ids.begin(), eog_ids.end());
      end_ids.insert(end_ids.end(), request.stop.stop_token_ids.begin(),
                     request.stop.stop_token_ids.end());
      json = ConstraintCursor(request.sampling.grammar, std::move(end_ids));
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
