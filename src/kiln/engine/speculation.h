// Speculative decoding's unit in the scheduler: who proposes (n-gram lookup or the draft
// model), how many tokens each request may propose in a step (its budget, the policy's cap),
// what verify steps taught (step costs, acceptance rates) and the backoff after misses. The
// decisions are speculation_policy.h's pure functions; this holds their state. It never
// touches KV pages or the executor of the target: the scheduler gives proposals their pages,
// and the token emitter accepts or rejects them (token_emitter.h).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "kiln/engine/draft_model_proposer.h"
#include "kiln/engine/engine_config.h"
#include "kiln/engine/sequence.h"
#include "kiln/engine/speculation_policy.h"
#include "kiln/engine/speculative_resources.h"

namespace kiln::engine {

class Speculation {
 public:
  // Measured costs mislead when the host's speed drifts, and sizes the policy avoids are never
  // measured again: every this-many-th step that capped proposals takes them all.
  static constexpr int64_t kRemeasureEvery = 16;
  // The n-gram lookup covers the last this-many tokens: bounded work per step on long contexts.
  static constexpr int64_t kLookupWindow = 8192;

  // Throws kiln::Error for a configuration it cannot run (SpeculativeConfig's ranges, both
  // proposers, a draft model without its executor or of another vocabulary than `vocab`).
  Speculation(const SpeculativeConfig& config, const SpeculativeResources& resources,
              int64_t vocab);
  ~Speculation();
  Speculation(const Speculation&) = delete;
  Speculation& operator=(const Speculation&) = delete;

  bool enabled() const { return config_.enabled(); }
  // Whether a decode step of `decoding` requests speculates at all.
  bool speculates(int64_t decoding) const { return enabled() && decoding <= config_.max_batch; }

  // Fills the proposals (seq.spec.draft) of a decode step's requests, all of them (every
  // request's proposals are cleared first): each one's budget, the policy's cap on them all,
  // then the proposer.
  void propose(const std::vector<Sequence*>& decoding);

  // The pieces of propose(), for tests. budget(): the request's budget this step (0 when it
  // cannot speculate; counts off a step it sits out). cap(): caps `budgets` (of `proposing`,
  // in order) where proposals would cost more than they are expected to give, beside
  // `plain_rows` decode rows that do not speculate; returns the cap.
  int64_t budget(Sequence& seq) const;
  int64_t cap(const std::vector<Sequence*>& proposing, std::vector<int64_t>& budgets,
              int64_t plain_rows);

  // A decode or verify step of `rows` rows took `seconds` (what the policy's costs are
  // measured from).
  void record_step(int64_t rows, double seconds);
  // A verify step kept `accepted` of the request's `proposed` proposals: its counts, the
  // acceptance rates, and the backoff.
  void record_verify(Sequence& seq, int64_t proposed, int64_t accepted);
  // The request is gone: the draft model forgets it (a preempted request keeps its draft).
  void release(uint64_t id);

  const SpecRuns& runs() const { return runs_; }  // every request's verify steps
  const DraftModelProposer* draft_model() const { return draft_model_.get(); }

 private:
  SpeculativeConfig config_;
  std::function<double(int64_t rows)> fixed_cost_;  // tests' fake step cost (unset: measured)
  double fixed_draft_cost_ = 0.0;
  std::unique_ptr<DraftModelProposer> draft_model_;  // SpeculativeConfig::draft_model
  StepCostModel step_costs_;                         // decode and verify steps' time by rows
  int64_t capped_steps_ = 0;                         // steps whose proposals the policy capped
  SpecRuns runs_;
};

}  // namespace kiln::engine
