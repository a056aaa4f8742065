// Scheduler: speculative decoding's proposals (how many each request may make, the n-gram or
// draft-model proposer, pages for their K/V) and the verification of a verify step's rows.
#include <algorithm>
#include <chrono>
#include <exception>
#include <limits>
#include <optional>

#include "kiln/base/error.h"
#include "kiln/base/log.h"
#include "kiln/engine/draft_model_proposer.h"
#include "kiln/engine/ngram_proposer.h"
#include "kiln/engine/scheduler.h"
#include "kiln/engine/scheduler_sequence.h"

namespace kiln::engine {

int64_t Scheduler::proposal_budget(Sequence& seq) {
  // Every request may speculate: greedy ones get exactly plain decoding's tokens (kernels are
  // batch invariant, so a verify row's logits are a decode step's), sampled, penalized and
  // constrained ones the same distribution (accept_proposals).
  if (seq.draft_skip > 0) {
    --seq.draft_skip;
    return 0;
  }
  // The token after the last proposal comes from the model for free, so at most
  // max_new_tokens - generated - 1 proposals can be used.
  const int64_t left = seq.request.stop.max_new_tokens - seq.generated() - 1;
  return std::min<int64_t>({config_.speculative.num_draft_tokens, seq.draft_limit, left});
}

void Scheduler::cap_budgets(const std::vector<Sequence*>& seqs, std::vector<int64_t>& budgets,
                            int64_t plain_rows) {
  if (seqs.empty()) return;
  // Rates: the request's own record, starting from the engine's (each with one kept and one
  // missed proposal added, so that no estimate starts at 0 or 1).
  const auto rate = [](double hits, double trials, double prior) {
    return (hits + 2.0 * prior) / (trials + 2.0);
  };
  const double first = rate(spec_runs_.first_hits, spec_runs_.rounds, 0.5);
  const double next = rate(spec_runs_.next_hits, spec_runs_.next_trials, 0.5);
  std::vector<SpeculationCandidate> candidates;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const SpecRuns& r = seqs[i]->spec_runs;
    candidates.push_back(
        {budgets[i], rate(r.first_hits, r.rounds, first), rate(r.next_hits, r.next_trials, next)});
  }
  std::function<double(int64_t)> cost = config_.speculative.step_cost;
  double draft_cost = config_.speculative.draft_step_cost;
  if (!cost) {
    // Before any measurement every size costs the same: speculation is tried, and measured.
    cost = [this](int64_t rows) { return step_costs_.estimate(rows).value_or(1.0); };
    draft_cost = draft_model_ ? draft_model_->step_seconds() : 0.0;
  }
  int64_t cap = choose_proposal_cap(candidates, plain_rows, cost, draft_model_ ? draft_cost : 0.0);
  // Measured costs can mislead (the host's speed drifts), and sizes the policy avoids are never
  // measured again: every 16th step that capped proposals takes them all, to measure anew.
  int64_t largest = 0;
  for (int64_t b : budgets) largest = std::max(largest, b);
  if (cap < largest && !config_.speculative.step_cost && ++capped_steps_ % 16 == 0) cap = largest;
  for (int64_t& b : budgets) b = std::min(b, cap);
  // The arguments cost two estimates per step: only when they are printed.
  if (spdlog::should_log(spdlog::level::debug)) {
    KILN_LOG_DEBUG(
        "speculation: cap {} for {} requests (first kept {:.2f}, then {:.2f}, step cost {:.4f} at "
        "{} rows, {:.4f} at {}, draft step {:.4f})",
        cap, seqs.size(), candidates[0].first, candidates[0].next, cost(plain_rows + 1),
        plain_rows + 1, cost(plain_rows + 1 + candidates[0].budget),
        plain_rows + 1 + candidates[0].budget, draft_model_ ? draft_cost : 0.0);
  }
}

void Scheduler::propose(std::vector<Sequence*>& seqs, std::vector<int64_t>& budgets) {
  if (draft_model_) {
    std::vector<DraftWant> wants;
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (budgets[i] <= 0) continue;
      wants.push_back(
          {seqs[i]->id, seqs[i]->tokens, static_cast<int>(budgets[i]), &seqs[i]->draft});
    }
    if (!wants.empty()) draft_model_->propose(wants);
  } else {
    // The lookup covers the last 8192 tokens: bounded work per step on long contexts.
    constexpr int64_t kLookupWindow = 8192;
    for (size_t i = 0; i < seqs.size(); ++i) {
      if (budgets[i] <= 0) continue;
      seqs[i]->draft = propose_ngram(seqs[i]->tokens, config_.speculative.ngram_match,
                                     static_cast<int>(budgets[i]), kLookupWindow);
    }
  }
  for (Sequence* seq : seqs) {
    // Pages for the proposals' K/V: free pages only. Rows past the pages there are drop off.
    const auto last_pos = [&] { return seq->n_kv + static_cast<int64_t>(seq->draft.size()); };
    while (!seq->draft.empty() &&
           static_cast<int64_t>(seq->pages.size()) * page_size_ <= last_pos()) {
      if (pool_->free_pages() == 0) {
        seq->draft.resize(static_cast<size_t>(std::max<int64_t>(
            0, static_cast<int64_t>(seq->pages.size()) * page_size_ - seq->n_kv - 1)));
        break;
      }
      pool_->alloc(1, seq->pages);
    }
  }
}

void Scheduler::accept_proposals(Sequence& seq, int64_t first_row, int64_t n_rows,
                                 bool greedy_only) {
  // Row j holds input token j (the last accepted token, then proposal j - 1) at position
  // n_kv + j; its output is the model's token after it. Greedy: proposal j is accepted when it
  // equals the model's token after row j. Sampled: the speculative sampling rule decides
  // (Sampler::sample_or_accept), each row's distribution after the tokens accepted before it
  // (penalties, banned ids, the JSON constraint). Only past an accepted proposal is row j + 1's
  // output one that plain decoding would reach.
  const int64_t base = seq.n_kv;
  const auto proposed = static_cast<int64_t>(seq.draft.size());
  RequestEvent ev;
  int64_t emitted = 0, accepted = 0;
  bool finished = false;
  try {
    for (int64_t j = 0; j < n_rows; ++j) {
      const bool has_proposal = j + 1 < n_rows;
      const int32_t proposal = has_proposal ? seq.draft[static_cast<size_t>(j)] : -1;
      int32_t token = 0;
      bool accept = false;
      if (greedy_only) {
        token = output_.greedy_ids[static_cast<size_t>(first_row + j)];
        accept = has_proposal && token == proposal;
      } else {
        std::span<float> logits(output_.logits.data() + (first_row + j) * vocab_,
                                static_cast<size_t>(vocab_));
        if (seq.json) constrain_to_json(seq, logits);
        TokenLogprob lp;
        TokenLogprob* want_lp = seq.request.logprobs >= 0 ? &lp : nullptr;
        token = has_proposal ? seq.sampler.sample_or_accept(logits, proposal, &accept,
                                                            seq.stop.banned_ids(), want_lp)
                             : seq.sampler.sample(logits, seq.stop.banned_ids(), want_lp);
        if (want_lp != nullptr) ev.logprobs.push_back(std::move(lp));
      }
      KILN_CHECK(token >= 0 && token < vocab_, "the executor returned token id {}", token);
      KILN_CHECK(feed_json(seq, token), "internal error: token {} broke the JSON constraint",
                 token);
      seq.tokens.push_back(token);
      seq.sampler.add_output(token);
      ++emitted;
      StopUpdate u = seq.stop.on_token(token);
      ev.new_tokens.push_back(token);
      ev.text_delta += u.text_delta;
      if (u.finished) {
        ev.finish_reason = u.reason;
        ev.matched_stop = std::move(u.matched_stop);
        ev.matched_stop_token = u.matched_stop_token;
        finished = true;
        break;
      }
      if (!accept) break;
      ++accepted;
    }
  } catch (const std::exception& e) {
    ev = RequestEvent{};
    ev.finish_reason = FinishReason::Abort;
    ev.error = std::string("sampling failed: ") + e.what();
    seq.draft.clear();
    finish(seq, ev);
    return;
  }
  // K/V is kept for the rows whose inputs were accepted tokens: the last token and the
  // accepted proposals. Pages holding only rejected rows go back to the pool.
  seq.n_kv = base + emitted;
  const auto keep =
      std::max<size_t>(static_cast<size_t>(ceil_div(seq.n_kv, page_size_)), seq.n_cached_pages);
  if (seq.pages.size() > keep) {
    std::vector<int32_t> surplus(seq.pages.begin() + static_cast<ptrdiff_t>(keep), seq.pages.end());
    seq.pages.resize(keep);
    pool_->free(surplus);  // NOLINT(clang-analyzer-unix.Malloc): KvPool::free, not libc's
  }
  seq.draft.clear();
  stats_.generated_tokens_total += emitted;
  ++stats_.spec_verify_steps;
  stats_.spec_proposed_tokens += proposed;
  stats_.spec_accepted_tokens += accepted;
  ++stats_.spec_accept_histogram[static_cast<size_t>(accepted)];
  ++seq.spec_verify_ct;
  seq.spec_proposed += static_cast<int>(proposed);
  seq.spec_accepted += static_cast<int>(accepted);
  if (proposed > 0) {
    seq.spec_runs.add(proposed, accepted);
    spec_runs_.add(proposed, accepted);
  }
  // Adapt: a miss halves what the request may propose next and sits out 2^misses - 1 steps
  // (at most 7); all accepted doubles it.
  if (accepted == 0) {
    seq.draft_misses = std::min(seq.draft_misses + 1, 3);
    seq.draft_skip = (1 << seq.draft_misses) - 1;
    seq.draft_limit = std::max(1, seq.draft_limit / 2);
  } else {
    seq.draft_misses = 0;
    seq.draft_limit = accepted == proposed
                          ? std::min(SpeculativeConfig::kMaxDraftTokens, seq.draft_limit * 2)
                          : std::max(1, static_cast<int>(accepted) + 1);
  }
  cache_computed_prefix(seq);
  if (finished) {
    finish(seq, ev);
  } else {
    emit(seq, ev);
  }
}

}  // namespace kiln::engine
