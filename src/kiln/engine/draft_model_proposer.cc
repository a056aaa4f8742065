#include "kiln/engine/draft_model_proposer.h"

#include <algorithm>
#include <chrono>
#include <exception>

#include "kiln/base/error.h"
#include "kiln/base/log.h"
#include "kiln/model/tokenizer.h"

namespace kiln::engine {
namespace {

// A catch-up of at most this many rows per request asks for every row's token, so the step
// returns every row and can replay a captured verify plan of the draft model; longer ones (the
// first round's prompt) run eagerly and return the last row only.
constexpr int64_t kEveryRowLimit = 4;

}  // namespace

DraftModelProposer::DraftModelProposer(ModelExecutor& draft, KvPool& pool)
    : draft_(&draft), pool_(&pool), page_size_(pool.page_size()) {}

DraftModelProposer::~DraftModelProposer() {
  for (auto& [id, state] : states_) pool_->free(state.pages);
}

void DraftModelProposer::release(uint64_t id) {
  auto it = states_.find(id);
  if (it == states_.end()) return;
  pool_->free(it->second.pages);
  states_.erase(it);
}

bool DraftModelProposer::prepare(const DraftWant& want, State& state, int& max_tokens) {
  const auto len = static_cast<int64_t>(want.tokens.size());
  // The draft cache is valid for the prefix it shares with the request (rejected proposals
  // past it are overwritten), and the request's last token is always fed again: its output is
  // the first proposal.
  auto mismatch = std::mismatch(state.kv_tokens.begin(), state.kv_tokens.end(), want.tokens.begin(),
                                want.tokens.end());
  const int64_t cached = std::min<int64_t>(mismatch.first - state.kv_tokens.begin(), len - 1);
  state.kv_tokens.resize(static_cast<size_t>(cached));
  // Proposal j (1-based) is the output of the row at position len - 2 + j: the last row fed
  // this round is at len + max_tokens - 2.
  max_tokens = static_cast<int>(std::min<int64_t>(max_tokens, draft_->context_length() - len + 1));
  while (max_tokens >= 1 &&
         static_cast<int64_t>(state.pages.size()) * page_size_ < len + max_tokens - 1) {
    if (!pool_->alloc(1, state.pages)) {
      max_tokens =
          static_cast<int>(static_cast<int64_t>(state.pages.size()) * page_size_ - len + 1);
      break;
    }
  }
  return max_tokens >= 1;
}

void DraftModelProposer::add_rows(StepBatch& batch, State& state, std::span<const int32_t> tokens,
                                  bool want_logits, bool all_logits) {
  batch.add_sequence(tokens, static_cast<int64_t>(state.kv_tokens.size()), state.pages, page_size_,
                     want_logits, want_logits && all_logits);
  state.kv_tokens.insert(state.kv_tokens.end(), tokens.begin(), tokens.end());
}

void DraftModelProposer::run(StepBatch& batch, StepOutput& out) {
  batch.greedy_only = batch.logit_rows() > 0;
  draft_->forward(batch, out);
  ++steps_;
  KILN_CHECK(static_cast<int64_t>(out.greedy_ids.size()) == batch.logit_rows(),
             "the draft model returned {} tokens for {} rows", out.greedy_ids.size(),
             batch.logit_rows());
}

void DraftModelProposer::round(std::vector<Active>& active) {
  // Catch-up: the tokens each request has that the draft has not seen, kCatchUpChunk rows per
  // request and step; the step that feeds a request's last token gives its first proposal.
  bool fed_prompt = false;  // a long catch-up: this round's time is no measure of a step's
  for (;;) {
    bool pending_long = false;
    for (const Active& a : active) {
      const auto len = static_cast<int64_t>(a.want->tokens.size());
      pending_long |= len - static_cast<int64_t>(a.state->kv_tokens.size()) > kCatchUpChunk;
    }
    if (!pending_long) break;
    fed_prompt = true;
    StepBatch chunk;
    for (Active& a : active) {
      const auto fed = static_cast<int64_t>(a.state->kv_tokens.size());
      const auto len = static_cast<int64_t>(a.want->tokens.size());
      if (len - fed <= kCatchUpChunk) continue;
      add_rows(chunk, *a.state, a.want->tokens.subspan(static_cast<size_t>(fed), kCatchUpChunk),
               false, false);
    }
    run(chunk, output_);
  }
  StepBatch last;
  bool every_row = true;
  for (const Active& a : active) {
    every_row &= a.want->tokens.size() - a.state->kv_tokens.size() <= kEveryRowLimit;
  }
  fed_prompt |= !every_row;
  const auto start = std::chrono::steady_clock::now();
  const int64_t steps_before = steps_;
  for (Active& a : active)
    add_rows(last, *a.state, a.want->tokens.subspan(a.state->kv_tokens.size()), true, every_row);
  run(last, output_);
  // The output rows: every row of each request (every_row) or its last only.
  int64_t row = 0;
  std::vector<int32_t> rows_of(active.size(), 0);
  for (int32_t s : last.token_seq) ++rows_of[static_cast<size_t>(s)];
  for (size_t i = 0; i < active.size(); ++i) {
    row += every_row ? rows_of[i] : 1;
    active[i].want->out->push_back(output_.greedy_ids[static_cast<size_t>(row - 1)]);
  }
  // Decode: proposal j + 1 from proposal j, for the requests that want more.
  for (int j = 1;; ++j) {
    StepBatch step;
    std::vector<const Active*> members;
    for (const Active& a : active) {
      if (a.max_tokens <= j) continue;
      const int32_t previous = a.want->out->back();
      add_rows(step, *a.state, std::span<const int32_t>(&previous, 1), true, false);
      members.push_back(&a);
    }
    if (members.empty()) break;
    run(step, output_);
    for (size_t i = 0; i < members.size(); ++i)
      members[i]->want->out->push_back(output_.greedy_ids[i]);
  }
  if (!fed_prompt) {
    const double per_step =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() /
        static_cast<double>(steps_ - steps_before);
    // Recent rounds weigh more: the host's speed drifts.
    step_seconds_ =
        step_seconds_ == 0.0 ? per_step : step_seconds_ + 0.2 * (per_step - step_seconds_);
  }
}

void DraftModelProposer::propose(std::span<DraftWant> wants) {
  std::vector<Active> active;
  for (DraftWant& w : wants) {
    w.out->clear();
    if (w.max_tokens < 1 || w.tokens.empty()) continue;
    State& state = states_[w.id];
    int max_tokens = w.max_tokens;
    if (!prepare(w, state, max_tokens)) {
      release(w.id);
      continue;
    }
    active.push_back({&w, &states_.at(w.id), max_tokens});
  }
  if (active.empty()) return;
  try {
    round(active);
  } catch (const std::exception& e) {
    // The draft cache may now hold K/V its kv_tokens do not describe: start these requests
    // over. The target decodes them plainly this step.
    KILN_LOG_WARN("draft model step failed ({}); {} requests decode without proposals this step",
                  e.what(), active.size());
    ++failed_rounds_;
    for (Active& a : active) {
      a.want->out->clear();
      release(a.want->id);
    }
  }
}

void check_draft_vocabulary(const model::Tokenizer& target, int64_t target_vocab,
                            const model::Tokenizer& draft, int64_t draft_vocab) {
  KILN_CHECK(target_vocab == draft_vocab && target.vocab_size() == draft.vocab_size(),
             "the draft model's vocabulary ({} tokens, {} outputs) differs from the target's "
             "({} tokens, {} outputs): a draft model must share the target's tokenizer",
             draft.vocab_size(), draft_vocab, target.vocab_size(), target_vocab);
  for (int32_t id = 0; id < target.vocab_size(); ++id) {
    KILN_CHECK(target.piece(id) == draft.piece(id),
               "the draft model's token {} is '{}', the target's '{}': a draft model must share "
               "the target's tokenizer",
               id, draft.piece(id), target.piece(id));
  }
}

}  // namespace kiln::engine
