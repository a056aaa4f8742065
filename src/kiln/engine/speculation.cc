#include "kiln/engine/speculation.h"

#include <algorithm>

#include "kiln/base/error.h"
#include "kiln/base/log.h"
#include "kiln/engine/ngram_proposer.h"

namespace kiln::engine {

static_assert(RequestSpeculation::kMaxDraftTokens == SpeculativeConfig::kMaxDraftTokens);

Speculation::Speculation(const SpeculativeConfig& config, const SpeculativeResources& resources,
                         int64_t vocab)
    : config_(config),
      fixed_cost_(resources.step_cost),
      fixed_draft_cost_(resources.draft_step_cost) {
  if (!config.enabled()) return;
  KILN_CHECK(config.num_draft_tokens >= 1 && config.num_draft_tokens <= config.kMaxDraftTokens,
             "speculative num_draft_tokens must be in [1, {}], got {}", config.kMaxDraftTokens,
             config.num_draft_tokens);
  KILN_CHECK(config.ngram_match.min_match >= 1 &&
                 config.ngram_match.min_match <= config.ngram_match.max_match,
             "the n-gram match window must satisfy 1 <= min ({}) <= max ({})",
             config.ngram_match.min_match, config.ngram_match.max_match);
  KILN_CHECK(config.max_batch >= 1, "speculative max_batch must be positive, got {}",
             config.max_batch);
  KILN_CHECK(!config.ngram || !config.draft_model,
             "speculative decoding takes n-gram lookup or a draft model, not both");
  if (config.draft_model) {
    KILN_CHECK(resources.draft_executor != nullptr && resources.draft_pool != nullptr,
               "a draft model needs its executor and KV pool");
    KILN_CHECK(resources.draft_executor->vocab_size() == vocab,
               "the draft model has {} outputs, the target {}: they must share a vocabulary",
               resources.draft_executor->vocab_size(), vocab);
    draft_model_ =
        std::make_unique<DraftModelProposer>(*resources.draft_executor, *resources.draft_pool);
  }
}

Speculation::~Speculation() = default;

int64_t Speculation::budget(Sequence& seq) const {
  // Every request may speculate: greedy ones get exactly plain decoding's tokens (kernels are
  // batch invariant, so a verify row's logits are a decode step's), sampled, penalized and
  // constrained ones the same distribution (token_emitter.h).
  return proposal_budget(seq.spec, config_.num_draft_tokens,
                         seq.request.stop.max_new_tokens - seq.generated());
}

int64_t Speculation::cap(const std::vector<Sequence*>& proposing, std::vector<int64_t>& budgets,
                         int64_t plain_rows) {
  if (proposing.empty()) return 0;
  // Rates: the request's own record, starting from the engine's (each with one kept and one
  // missed proposal added, so that no estimate starts at 0 or 1).
  const auto rate = [](double hits, double trials, double prior) {
    return (hits + 2.0 * prior) / (trials + 2.0);
  };
  const double first = rate(runs_.first_hits, runs_.rounds, 0.5);
  const double next = rate(runs_.next_hits, runs_.next_trials, 0.5);
  std::vector<SpeculationCandidate> candidates;
  for (size_t i = 0; i < proposing.size(); ++i) {
    const SpecRuns& r = proposing[i]->spec.runs;
    candidates.push_back(
        {budgets[i], rate(r.first_hits, r.rounds, first), rate(r.next_hits, r.next_trials, next)});
  }
  std::function<double(int64_t)> cost = fixed_cost_;
  double draft_cost = fixed_draft_cost_;
  if (!cost) {
    // Before any measurement every size costs the same: speculation is tried, and measured.
    cost = [this](int64_t rows) { return step_costs_.estimate(rows).value_or(1.0); };
    draft_cost = draft_model_ ? draft_model_->step_seconds() : 0.0;
  }
  int64_t cap = choose_proposal_cap(candidates, plain_rows, cost, draft_model_ ? draft_cost : 0.0);
  // Measured costs only: every kRemeasureEvery-th step that capped proposals takes them all, to
  // measure anew.
  int64_t largest = 0;
  for (int64_t b : budgets) largest = std::max(largest, b);
  if (cap < largest && !fixed_cost_ && ++capped_steps_ % kRemeasureEvery == 0) cap = largest;
  for (int64_t& b : budgets) b = std::min(b, cap);
  // The arguments cost two estimates per step: only when they are printed.
  if (spdlog::should_log(spdlog::level::debug)) {
    KILN_LOG_DEBUG(
        "speculation: cap {} for {} requests (first kept {:.2f}, then {:.2f}, step cost {:.4f} at "
        "{} rows, {:.4f} at {}, draft step {:.4f})",
        cap, proposing.size(), candidates[0].first, candidates[0].next, cost(plain_rows + 1),
        plain_rows + 1, cost(plain_rows + 1 + candidates[0].budget),
        plain_rows + 1 + candidates[0].budget, draft_model_ ? draft_cost : 0.0);
  }
  return cap;
}

void Speculation::propose(const std::vector<Sequence*>& decoding) {
  std::vector<Sequence*> proposing;
  std::vector<int64_t> budgets;
  for (Sequence* seq : decoding) {
    seq->spec.draft.clear();
    const int64_t k = budget(*seq);
    if (k <= 0) continue;
    proposing.push_back(seq);
    budgets.push_back(k);
  }
  cap(proposing, budgets, static_cast<int64_t>(decoding.size() - proposing.size()));
  if (draft_model_) {
    std::vector<DraftWant> wants;
    for (size_t i = 0; i < proposing.size(); ++i) {
      if (budgets[i] <= 0) continue;
      wants.push_back({proposing[i]->id, proposing[i]->tokens, static_cast<int>(budgets[i]),
                       &proposing[i]->spec.draft});
    }
    if (!wants.empty()) draft_model_->propose(wants);
  } else {
    for (size_t i = 0; i < proposing.size(); ++i) {
      if (budgets[i] <= 0) continue;
      proposing[i]->spec.draft = propose_ngram(proposing[i]->tokens, config_.ngram_match,
                                               static_cast<int>(budgets[i]), kLookupWindow);
    }
  }
}

void Speculation::record_step(int64_t rows, double seconds) {
  // Without speculation nobody reads the costs.
  if (enabled()) step_costs_.record(rows, seconds);
}

void Speculation::record_verify(Sequence& seq, int64_t proposed, int64_t accepted) {
  ++seq.spec.verify_ct;
  seq.spec.proposed += static_cast<int>(proposed);
  seq.spec.accepted += static_cast<int>(accepted);
  if (proposed > 0) {
    seq.spec.runs.add(proposed, accepted);
    runs_.add(proposed, accepted);
  }
  back_off(seq.spec, proposed, accepted);
}

void Speculation::release(uint64_t id) {
  if (draft_model_) draft_model_->release(id);
}

}  // namespace kiln::engine
