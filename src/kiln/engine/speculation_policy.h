// How many tokens each request may have proposed in this step (speculative decoding,
// docs/speculative-decoding.md): verifying proposals costs rows, and rows cost time once a step
// stops being bound by reading the weights. The policy compares the expected tokens per second
// of every cap on the proposal length (0: no speculation) under a cost model of step time by
// rows and keeps the best, so a batch that is already compute bound does not speculate.
//
// Expected tokens: a request whose first proposal is kept with probability f, and each later
// one with probability n when the one before it was, gets 1 + f (1 + n + ... + n^(k-1)) tokens
// from k proposals (a verify step always yields at least one). Two rates, not one: copied
// proposals tend to be kept in runs (a lookup that found the right place keeps matching), and
// one rate would undervalue long proposals. The
// cost model is measured (StepCostModel: the executor's time for decode and verify steps by
// rows) or, in tests, given.
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <vector>

namespace kiln::engine {

// Seconds per step by rows, from measurements: per row count the fastest of its last
// kWindow steps (a step's time only goes up with interference: a page fault on a plan's first
// replay, another process, so the minimum of recent ones is its cost, and old ones age out
// when the host slows down), interpolated linearly between measured counts and flat beyond.
class StepCostModel {
 public:
  static constexpr size_t kWindow = 8;
  void record(int64_t rows, double seconds);
  // nullopt before the first measurement.
  std::optional<double> estimate(int64_t rows) const;

 private:
  struct Recent {
    double seconds[kWindow] = {};
    size_t count = 0;  // measurements so far (the ring holds the last kWindow)
    double fastest() const;
  };
  std::map<int64_t, Recent> recent_;
};

// Verify steps' outcomes as the policy reads them: how often the first proposal was kept, and a
// later one when the one before it was.
struct SpecRuns {
  double rounds = 0, first_hits = 0, next_trials = 0, next_hits = 0;
  void add(int64_t proposed, int64_t kept) {
    rounds += 1;
    first_hits += kept > 0 ? 1 : 0;
    next_trials += static_cast<double>(std::min(kept, proposed - 1));
    next_hits += static_cast<double>(std::max<int64_t>(kept - 1, 0));
  }
};

// One request's speculation: this step's proposals (empty: a plain decode row), the most it may
// propose next (halved on a miss, doubled when all are accepted), steps to sit out after
// misses, and the counts reported with the request.
struct RequestSpeculation {
  static constexpr int kMaxDraftTokens = 16;  // SpeculativeConfig::kMaxDraftTokens
  std::vector<int32_t> draft;
  int limit = kMaxDraftTokens;
  int misses = 0;
  int skip = 0;
  int verify_ct = 0;
  int proposed = 0;
  int accepted = 0;
  SpecRuns runs;
};

// The budget rule: how many tokens a request may have proposed this step, given the most the
// engine allows (num_draft_tokens) and the tokens it may still generate (`tokens_left`). 0
// while it sits out steps after misses (each call counts one of them off). The token after the
// last proposal comes from the model for free, so at most tokens_left - 1 proposals are used.
int64_t proposal_budget(RequestSpeculation& spec, int64_t num_draft_tokens, int64_t tokens_left);

// The backoff rule after a verify step that kept `accepted` of `proposed` proposals: a miss
// halves what the request may propose next and sits out 2^misses - 1 steps (at most 7); all
// kept doubles it (up to kMaxDraftTokens); some kept allows one more than were kept.
void back_off(RequestSpeculation& spec, int64_t proposed, int64_t accepted);

struct SpeculationCandidate {
  int64_t budget = 0;  // most proposals this request may have (>= 1)
  double first = 0.5;  // estimated probability that its first proposal is kept
  double next = 0.5;   // ... that a later one is kept when the one before it was
};

// Expected tokens from one verify step with k proposals (the rates as above).
double expected_tokens(double first, double next, int64_t k);

// The cap on every candidate's proposals that maximizes expected tokens per second for a step
// with `plain_rows` rows besides the candidates' (their own last token included in neither:
// each candidate adds 1 + min(cap, budget) rows). `step_seconds(rows)`: the step's cost;
// `draft_seconds_per_token`: what proposing one token costs the candidates (0 for n-gram
// lookup). Caps tried: 0, 1, 2, 4, ... up to the largest budget. Ties go to the smaller cap.
int64_t choose_proposal_cap(std::span<const SpeculationCandidate> candidates, int64_t plain_rows,
                            const std::function<double(int64_t rows)>& step_seconds,
                            double draft_seconds_per_token);

}  // namespace kiln::engine
