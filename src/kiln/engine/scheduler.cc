#include "kiln/engine/scheduler.h"

#include <algorithm>
#include <exception>
#include <span>

#include "kiln/base/error.h"
#include "kiln/base/log.h"
#include "kiln/engine/admission_budget.h"
#include "kiln/engine/request_limits.h"
#include "kiln/engine/sequence.h"

namespace kiln::engine {

namespace {
// Token masks of JSON constraints kept for reuse: 2,048 masks of a 262,144-token vocabulary.
constexpr size_t kMaskCacheBytes = size_t{64} << 20;
}  // namespace

Scheduler::Scheduler(ModelExecutor& executor, KvPool& pool, const TokenText& tokenizer,
                     const EngineConfig& config, const SpeculativeResources& speculative)
    : tokenizer_(&tokenizer),
      config_(config),
      vocab_(executor.vocab_size()),
      pages_(pool, config.enable_prefix_cache),
      masks_(tokenizer, vocab_, kMaskCacheBytes),
      forward_(executor, masks_, tokenizer, vocab_),
      emitter_(masks_, tokenizer, vocab_),
      speculation_(config.speculative, speculative, vocab_) {
  KILN_CHECK(config.max_running_requests > 0, "max_running_requests must be positive");
  KILN_CHECK(config.max_queued_requests >= 0, "max_queued_requests must be >= 0");
  KILN_CHECK(config.chunked_prefill_size > 0, "chunked_prefill_size must be positive");
  KILN_CHECK(config.max_prefill_tokens > 0, "max_prefill_tokens must be positive");
  KILN_CHECK(vocab_ > 0, "the model reports an empty vocabulary");
  engine::validate(config.schedule);
  context_limit_ = executor.context_length();
  if (config.max_context > 0)
    context_limit_ = std::min<int64_t>(context_limit_, config.max_context);
  KILN_CHECK(context_limit_ > 0, "the context length must be positive");
  const int64_t n = std::min(vocab_, tokenizer.vocab_size());
  for (int32_t t = 0; t < n; ++t) {
    if (tokenizer.is_end_of_generation(t)) eog_ids_.push_back(t);
  }
  stats_.kv_pages_total = pool.n_pages();
}

Scheduler::~Scheduler() { abort_all("the engine was destroyed"); }
void Scheduler::validate(const GenerateRequest& request) const {
  engine::validate(request, RequestLimits{.vocab = vocab_,
                                          .context = context_limit_,
                                          .kv_pages = pages_.pool().n_pages(),
                                          .page_size = pages_.page_size()});
}

void Scheduler::add(uint64_t id, GenerateRequest request, EventCallback on_event, uint64_t seed) {
  auto seq = std::make_unique<Sequence>(id, next_arrival_++, std::move(request),
                                        std::move(on_event), seed, *tokenizer_, eog_ids_);
  stats_.prompt_tokens_total += seq->n_prompt;
  if (seq->request.stop.max_new_tokens == 0 && !seq->scoring() &&
      seq->request.hidden == HiddenOutput::kNone) {  // nothing to compute
    RequestEvent ev;
    ev.finished = true;
    ev.finish_reason = FinishReason::Length;
    seq->cached_tokens = 0;
    emit(*seq, ev);
    ++stats_.requests_finished;
    return;
  }
  insert_waiting(std::move(seq));
}

void Scheduler::insert_waiting(std::unique_ptr<Sequence> seq) {
  auto pos = std::upper_bound(waiting_.begin(), waiting_.end(), seq->ticket.arrival,
                              [](uint64_t a, const auto& s) { return a < s->ticket.arrival; });
  waiting_.insert(pos, std::move(seq));
}

void Scheduler::insert_running(std::unique_ptr<Sequence> seq) {
  auto pos = std::upper_bound(
      running_.begin(), running_.end(), seq->ticket,
      [](const ScheduleTicket& t, const auto& s) { return protected_before(t, s->ticket); });
  running_.insert(pos, std::move(seq));
}

std::unique_ptr<Sequence> Scheduler::take(Sequence& seq) {
  for (auto it = running_.begin(); it != running_.end(); ++it) {
    if (it->get() == &seq) {
      auto owned = std::move(*it);
      running_.erase(it);
      return owned;
    }
  }
  for (auto it = waiting_.begin(); it != waiting_.end(); ++it) {
    if (it->get() == &seq) {
      auto owned = std::move(*it);
      waiting_.erase(it);
      return owned;
    }
  }
  return nullptr;
}

void Scheduler::finish(Sequence& seq, RequestEvent& ev) {
  ev.finished = true;
  try {
    pages_.release(seq, /*to_cache=*/ev.error.empty());
  } catch (const std::exception& e) {
    // Only a bookkeeping bug gets here; the client still gets its final event.
    KILN_LOG_ERROR("request {}: releasing its KV pages failed: {}", seq.id, e.what());
  }
  speculation_.release(seq.id);
  auto owned = take(seq);
  ++stats_.requests_finished;
  emit(seq, ev);
}

void Scheduler::cancel(uint64_t id) {
  auto find = [&](auto& list) -> Sequence* {
    for (auto& s : list)
      if (s->id == id) return s.get();
    return nullptr;
  };
  Sequence* seq = find(running_);
  if (seq == nullptr) seq = find(waiting_);
  if (seq == nullptr) return;
  RequestEvent ev;
  ev.finish_reason = FinishReason::Abort;
  finish(*seq, ev);
}

void Scheduler::abort_all(const std::string& error) {
  while (!running_.empty() || !waiting_.empty()) {
    Sequence& seq = !running_.empty() ? *running_.back() : *waiting_.back();
    RequestEvent ev;
    ev.finish_reason = FinishReason::Abort;
    ev.error = error;
    finish(seq, ev);
  }
}

bool Scheduler::flush_cache() {
  if (!idle()) return false;
  pages_.flush_cache();
  return true;
}

EngineStats Scheduler::stats() const {
  EngineStats s = stats_;
  s.queued = static_cast<int64_t>(waiting_.size());
  s.running = static_cast<int64_t>(running_.size());
  s.kv_pages_total = pages_.pool().n_pages();
  s.kv_pages_used = pages_.pool().used_pages();
  s.kv_pages_cached = pages_.evictable_pages();
  const JsonMaskCache::Stats masks = masks_.cache_stats();
  s.json_mask_hits = static_cast<int64_t>(masks.hits);
  s.json_mask_misses = static_cast<int64_t>(masks.misses);
  return s;
}

// ---- admission and memory ------------------------------------------------------------

std::vector<Sequence*> Scheduler::admission_order() {
  std::vector<ScheduleTicket> tickets;
  tickets.reserve(waiting_.size());
  for (const auto& w : waiting_) tickets.push_back(w->ticket);
  const std::vector<size_t> order = engine::admission_order(
      config_.schedule, tickets,
      [&](size_t i) -> int64_t { return pages_.cached_prefix_tokens(*waiting_[i]); });
  std::vector<Sequence*> out;
  out.reserve(order.size());
  for (size_t i : order) out.push_back(waiting_[i].get());
  return out;
}

void Scheduler::preempt_least_protected() {
  Sequence& victim = *running_.back();
  KILN_LOG_DEBUG("preempting request {} ({} tokens computed)", victim.id, victim.n_kv);
  pages_.release(victim, /*to_cache=*/true);
  insert_waiting(take(victim));
  ++stats_.preemptions;
}

// ---- steps ---------------------------------------------------------------------------------

bool Scheduler::step() {
  auto has_prefill_work = [&] {
    if (!waiting_.empty()) return true;
    for (const auto& r : running_)
      if (r->state == Sequence::State::Prefilling) return true;
    return false;
  };
  const bool decode_ready = decoding_count() > 0;
  if (has_prefill_work()) {
    if (decode_ready && config_.mixed_steps) {
      // A mixed step: the decode rows ride along with the prefill chunk, so every decoding
      // request gets its token in this step instead of waiting for the next one. When no
      // prompt rows fit (no pages to admit anyone), it is a plain decode step below.
      if (ensure_decode_pages() && prefill_step(/*with_decode_rows=*/true)) return true;
    } else if (!(last_step_was_prefill_ && decode_ready)) {
      if (prefill_step(/*with_decode_rows=*/false)) {
        last_step_was_prefill_ = true;
        return true;
      }
    }
  }
  last_step_was_prefill_ = false;
  if (decode_ready) return decode_step();
  return false;
}

int64_t Scheduler::decoding_count() const {
  int64_t n = 0;
  for (const auto& r : running_) n += r->state == Sequence::State::Decoding ? 1 : 0;
  return n;
}

bool Scheduler::ensure_decode_pages() {
  // Most protected first, so that preemption (which takes the least protected, running_.back())
  // favors them.
  for (size_t i = 0; i < running_.size(); ++i) {
    Sequence& seq = *running_[i];
    if (seq.state != Sequence::State::Decoding) continue;
    // Out of pages: the least protected request makes room, until seq itself is that one.
    bool preempted_self = false;
    while (!pages_.grow_for_decode(seq)) {
      preempted_self = running_.back().get() == &seq;
      preempt_least_protected();
      if (preempted_self) break;
    }
    if (preempted_self) break;
  }
  return decoding_count() > 0;
}

void Scheduler::add_decode_rows(StepBatch& batch, std::vector<Sequence*>& members,
                                bool with_proposals) {
  std::vector<Sequence*> decoding;
  for (auto& r : running_)
    if (r->state == Sequence::State::Decoding) decoding.push_back(r.get());
  const bool speculate =
      with_proposals && speculation_.speculates(static_cast<int64_t>(decoding.size()));
  if (speculate) {
    speculation_.propose(decoding);
    for (Sequence* seq : decoding) pages_.grow_for_proposals(*seq);
  }
  std::vector<int32_t> rows;
  for (Sequence* seq : decoding) {
    if (!speculate) seq->spec.draft.clear();
    rows.assign(1, seq->tokens.back());
    rows.insert(rows.end(), seq->spec.draft.begin(), seq->spec.draft.end());
    // A verify step needs the model's token after every row.
    batch.add_sequence(rows, seq->n_kv, seq->pages, pages_.page_size(), /*want_logits=*/true,
                       /*all_logits=*/rows.size() > 1);
    members.push_back(seq);
  }
}

void Scheduler::add_prompt_chunk(StepBatch& batch, std::vector<Sequence*>& members, Sequence& seq,
                                 AdmissionBudget& budget) {
  const int64_t remaining = static_cast<int64_t>(seq.tokens.size()) - seq.n_kv;
  int64_t take = std::min(
      {remaining, static_cast<int64_t>(config_.chunked_prefill_size), budget.prompt_tokens()});
  // Scoring rows return a full logits row each: they run in chunks of their own, small
  // enough that the rows fit in memory, and rows before them run as a plain chunk.
  bool all_logits = false;
  if (seq.scoring()) {
    const int64_t first = seq.next_scoring_row();
    KILN_CHECK(seq.n_kv <= first, "request {}: prompt row {} was skipped before scoring", seq.id,
               first);
    if (seq.n_kv < first) {
      take = std::min(take, first - seq.n_kv);
    } else {
      take = std::min(take, kScoringChunkRows);
      all_logits = true;
    }
  }
  if (take <= 0) return;
  const bool reaches_end = seq.n_kv + take == static_cast<int64_t>(seq.tokens.size());
  const bool embedding = seq.request.hidden != HiddenOutput::kNone;
  batch.add_sequence(std::span<const int32_t>(seq.tokens)
                         .subspan(static_cast<size_t>(seq.n_kv), static_cast<size_t>(take)),
                     seq.n_kv, seq.pages, pages_.page_size(),
                     !embedding && (all_logits || reaches_end), all_logits);
  if (embedding) {
    const bool every_row = seq.request.hidden == HiddenOutput::kMean;
    batch.seqs.back().want_hidden = every_row || reaches_end;
    batch.seqs.back().all_hidden = every_row;
  }
  members.push_back(&seq);
  budget.spend_prompt_tokens(take);
}

bool Scheduler::prefill_step(bool with_decode_rows) {
  StepBatch batch;
  std::vector<Sequence*> members;
  // No proposals beside a prompt chunk: the chunk makes the step compute bound, where every
  // proposal row is paid in full.
  if (with_decode_rows) add_decode_rows(batch, members, /*with_proposals=*/false);
  const size_t decode_members = members.size();
  AdmissionBudget budget(config_, static_cast<int64_t>(running_.size()), decoding_count());
  for (auto& r : running_) {
    if (budget.prompt_tokens() <= 0) break;
    if (r->state == Sequence::State::Prefilling) add_prompt_chunk(batch, members, *r, budget);
  }
  if (budget.has_room() && !waiting_.empty()) {
    for (Sequence* seq : admission_order()) {
      if (!budget.has_room()) break;
      // The first that does not fit stops admission: nobody overtakes it for lack of pages,
      // so big requests are not starved.
      if (!pages_.reserve(*seq, budget, stats_)) break;
      insert_running(take(*seq));
      budget.admitted();
      for (auto& w : waiting_) count_overtaken(seq->ticket, w->ticket);
      add_prompt_chunk(batch, members, *seq, budget);
    }
  }
  if (members.size() == decode_members) return false;  // no prompt rows: not a prefill step
  if (decode_members > 0) ++stats_.mixed_steps;
  run_batch(batch, members,
            decode_members > 0 ? ForwardPass::Rows::PromptAndDecode : ForwardPass::Rows::Prompt);
  return true;
}

bool Scheduler::decode_step() {
  if (!ensure_decode_pages()) return false;
  StepBatch batch;
  std::vector<Sequence*> members;
  add_decode_rows(batch, members, /*with_proposals=*/true);
  if (members.empty()) return false;
  run_batch(batch, members, ForwardPass::Rows::Decode);
  return true;
}

// ---- outputs -------------------------------------------------------------------------------

void Scheduler::run_batch(StepBatch& batch, const std::vector<Sequence*>& members,
                          ForwardPass::Rows rows) {
  // Greedy fast path: the LM head then only returns argmax ids.
  bool greedy_only = true;
  std::vector<int64_t> rows_of(members.size(), 0);
  for (int32_t s : batch.token_seq) ++rows_of[static_cast<size_t>(s)];
  for (size_t i = 0; i < members.size(); ++i) {
    if (!batch.seqs[i].want_logits) continue;
    // Verify rows (proposals) want the argmax of every row: greedy ids serve them too.
    const bool scoring = batch.seqs[i].all_logits && members[i]->spec.draft.empty();
    greedy_only &= !scoring && members[i]->sampler.greedy_fast_path_ok() &&
                   members[i]->stop.banned_ids().empty();
  }
  batch.greedy_only = greedy_only && batch.logit_rows() > 0;

  const std::string error = forward_.run(batch, members, rows, speculation_, stats_);
  if (!error.empty()) {
    KILN_LOG_ERROR("forward step of {} sequences failed: {}", members.size(), error);
    for (Sequence* seq : members) {
      RequestEvent ev;
      ev.finish_reason = FinishReason::Abort;
      ev.error = "model execution failed: " + error;
      finish(*seq, ev);
    }
    return;
  }
  int64_t next_row = 0, next_hidden_row = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    Sequence& seq = *members[i];
    const StepSequence& ss = batch.seqs[i];
    if (seq.request.hidden != HiddenOutput::kNone) {
      const int64_t n_hidden = !ss.want_hidden ? 0 : ss.all_hidden ? rows_of[i] : 1;
      take_hidden_outputs(seq, ss, next_hidden_row, n_hidden, rows_of[i]);
      next_hidden_row += n_hidden;
      continue;
    }
    // This sequence's logits rows: none, its last row, or (scoring, verify) all its rows.
    const int64_t n_rows = !ss.want_logits ? 0 : ss.all_logits ? rows_of[i] : 1;
    const int64_t first_row = next_row;
    next_row += n_rows;
    if (!seq.spec.draft.empty()) {
      take_verify_outputs(seq, first_row, batch.greedy_only);
    } else {
      take_plain_outputs(seq, ss, first_row, n_rows, rows_of[i], batch.greedy_only);
    }
  }
}

void Scheduler::take_plain_outputs(Sequence& seq, const StepSequence& ss, int64_t first_row,
                                   int64_t n_rows, int64_t batch_rows, bool greedy) {
  if (speculation_.enabled() && seq.state == Sequence::State::Decoding) ++seq.spec.verify_ct;
  seq.n_kv = ss.seq_len;
  if (ss.all_logits) {
    try {
      score_prompt_rows(seq, ss.seq_len - batch_rows, batch_rows, first_row);
    } catch (const std::exception& e) {
      RequestEvent ev;
      ev.finish_reason = FinishReason::Abort;
      ev.error = std::string("scoring the prompt failed: ") + e.what();
      finish(seq, ev);
      return;
    }
  }
  // Only a step that reaches the end of the sequence samples.
  if (n_rows == 0 || seq.n_kv < static_cast<int64_t>(seq.tokens.size())) {
    pages_.publish_prefix(seq);
    return;
  }
  seq.state = Sequence::State::Decoding;
  pages_.publish_prefix(seq);
  RequestEvent ev;
  if (!seq.scores_sent) {
    ev.prompt_logprobs = std::move(seq.scores);
    seq.scores_sent = true;
  }
  if (seq.request.stop.max_new_tokens == 0) {  // scoring only
    ev.finish_reason = FinishReason::Length;
    finish(seq, ev);
    return;
  }
  // The sequence's last row samples (the one after the prompt, when it scored every row).
  const EmittedTokens taken =
      emitter_.take_tokens(seq, forward_.output(), greedy, first_row + n_rows - 1, {}, ev);
  stats_.generated_tokens_total += taken.emitted;
  if (taken.failed || taken.finished) {
    finish(seq, ev);
  } else {
    emit(seq, ev);
  }
}

void Scheduler::take_hidden_outputs(Sequence& seq, const StepSequence& ss, int64_t first_row,
                                    int64_t n_rows, int64_t batch_rows) {
  const StepOutput& out = forward_.output();
  const int64_t dim = out.hidden_dim;
  seq.n_kv = ss.seq_len;
  // Row j holds position first_pos + j; positions already kept (recomputed after a
  // preemption) are skipped.
  const int64_t first_pos = ss.all_hidden ? ss.seq_len - batch_rows : ss.seq_len - 1;
  for (int64_t j = 0; j < n_rows; ++j) {
    if (ss.all_hidden && first_pos + j != seq.hidden_positions) continue;
    const float* h = out.hidden.data() + (first_row + j) * dim;
    if (!ss.all_hidden || seq.hidden.empty()) seq.hidden.assign(static_cast<size_t>(dim), 0.0);
    for (int64_t d = 0; d < dim; ++d) seq.hidden[static_cast<size_t>(d)] += h[d];
    seq.hidden_positions = first_pos + j + 1;
  }
  pages_.publish_prefix(seq);
  if (seq.n_kv < static_cast<int64_t>(seq.tokens.size())) return;
  RequestEvent ev;
  ev.finish_reason = FinishReason::Length;
  if (seq.hidden_positions != seq.n_prompt) {
    ev.finish_reason = FinishReason::Abort;
    ev.error = fmt::format("internal error: {} of the prompt's {} hidden states were kept",
                           seq.hidden_positions, seq.n_prompt);
  } else {
    const double rows =
        seq.request.hidden == HiddenOutput::kMean ? static_cast<double>(seq.n_prompt) : 1.0;
    ev.hidden.resize(seq.hidden.size());
    for (size_t d = 0; d < seq.hidden.size(); ++d)
      ev.hidden[d] = static_cast<float>(seq.hidden[d] / rows);
    ev.hidden_dim = dim;
  }
  finish(seq, ev);
}

void Scheduler::take_verify_outputs(Sequence& seq, int64_t first_row, bool greedy) {
  const int64_t base = seq.n_kv;
  const auto proposed = static_cast<int64_t>(seq.spec.draft.size());
  RequestEvent ev;
  const EmittedTokens taken =
      emitter_.take_tokens(seq, forward_.output(), greedy, first_row, seq.spec.draft, ev);
  if (taken.failed) {
    seq.spec.draft.clear();
    finish(seq, ev);
    return;
  }
  // K/V is kept for the rows whose inputs were accepted tokens: the last token and the
  // accepted proposals.
  seq.n_kv = base + taken.emitted;
  pages_.keep_verified(seq);
  seq.spec.draft.clear();
  stats_.generated_tokens_total += taken.emitted;
  ++stats_.spec_verify_steps;
  stats_.spec_proposed_tokens += proposed;
  stats_.spec_accepted_tokens += taken.accepted;
  ++stats_.spec_accept_histogram[static_cast<size_t>(taken.accepted)];
  speculation_.record_verify(seq, proposed, taken.accepted);
  pages_.publish_prefix(seq);
  if (taken.finished) {
    finish(seq, ev);
  } else {
    emit(seq, ev);
  }
}

void Scheduler::score_prompt_rows(Sequence& seq, int64_t first_pos, int64_t n_rows,
                                  int64_t first_row) {
  // Row j holds position first_pos + j and predicts the token at first_pos + j + 1.
  const int top = std::max(seq.request.logprobs, 0);
  for (int64_t j = 0; j < n_rows; ++j) {
    const int64_t target = first_pos + j + 1;
    if (target != seq.score_from + static_cast<int64_t>(seq.scores.size()) ||
        target >= seq.n_prompt)
      continue;
    std::span<const float> logits(forward_.output().logits.data() + (first_row + j) * vocab_,
                                  static_cast<size_t>(vocab_));
    seq.scores.push_back(score_token(logits, seq.tokens[static_cast<size_t>(target)], top));
  }
}

}  // namespace kiln::engine
