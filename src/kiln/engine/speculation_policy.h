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
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>

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
