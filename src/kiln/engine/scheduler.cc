#include "kiln/engine/scheduler.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <limits>
#include <optional>

#include "kiln/base/error.h"
#include "kiln/base/log.h"
#include "kiln/engine/draft_model_proposer.h"
#include "kiln/engine/ngram_proposer.h"
#include "kiln/engine/sampler.h"
#include "kiln/engine/scheduler_sequence.h"
#include "kiln/engine/stop_checker.h"

namespace kiln::engine {

namespace {
// Token masks of JSON constraints kept for reuse: 2,048 masks of a 262,144-token vocabulary.
constexpr size_t kMaskCacheBytes = size_t{64} << 20;
}  // namespace

Scheduler::Scheduler(ModelExecutor& executor, KvPool& pool, const TokenText& tokenizer,
                     const EngineConfig& config)
    : executor_(&executor),
      pool_(&pool),
      tokenizer_(&tokenizer),
      config_(config),
      page_size_(pool.page_size()),
      vocab_(executor.vocab_size()),
      masks_(tokenizer, vocab_, kMaskCacheBytes) {
  KILN_CHECK(config.max_running_requests > 0, "max_running_requests must be positive");
  KILN_CHECK(config.max_queued_requests >= 0, "max_queued_requests must be >= 0");
  KILN_CHECK(config.chunked_prefill_size > 0, "chunked_prefill_size must be positive");
  KILN_CHECK(config.max_prefill_tokens > 0, "max_prefill_tokens must be positive");
  KILN_CHECK(vocab_ > 0, "the model reports an empty vocabulary");
  engine::validate(config.schedule);
  const SpeculativeConfig& spec = config.speculative;
  if (spec.enabled()) {
    KILN_CHECK(spec.num_draft_tokens >= 1 && spec.num_draft_tokens <= spec.kMaxDraftTokens,
               "speculative num_draft_tokens must be in [1, {}], got {}", spec.kMaxDraftTokens,
               spec.num_draft_tokens);
    KILN_CHECK(
        spec.ngram_match.min_match >= 1 && spec.ngram_match.min_match <= spec.ngram_match.max_match,
        "the n-gram match window must satisfy 1 <= min ({}) <= max ({})",
        spec.ngram_match.min_match, spec.ngram_match.max_match);
    KILN_CHECK(spec.max_batch >= 1, "speculative max_batch must be positive, got {}",
               spec.max_batch);
    KILN_CHECK(!spec.ngram || spec.draft_executor == nullptr,
               "speculative decoding takes n-gram lookup or a draft model, not both");
    if (spec.draft_executor != nullptr) {
      KILN_CHECK(spec.draft_pool != nullptr, "a draft model needs its KV pool");
      KILN_CHECK(spec.draft_executor->vocab_size() == vocab_,
                 "the draft model has {} outputs, the target {}: they must share a vocabulary",
                 spec.draft_executor->vocab_size(), vocab_);
      draft_model_ = std::make_unique<DraftModelProposer>(*spec.draft_executor, *spec.draft_pool);
    }
  }
  context_limit_ = executor.context_length();
  if (config.max_context > 0)
    context_limit_ = std::min<int64_t>(context_limit_, config.max_context);
  KILN_CHECK(context_limit_ > 0, "the context length must be positive");
  const int64_t n = std::min(vocab_, tokenizer.vocab_size());
  for (int32_t t = 0; t < n; ++t) {
    if (tokenizer.is_end_of_generation(t)) eog_ids_.push_back(t);
  }
  if (config.enable_prefix_cache) cache_ = std::make_unique<RadixCache>(pool);
  stats_.kv_pages_total = pool.n_pages();
}

Scheduler::~Scheduler() {
  abort_all("the engine was destroyed");
  cache_.reset();  // returns the cached pages
}

void Scheduler::validate(const GenerateRequest& r) const {
  KILN_CHECK(!r.prompt_ids.empty(), "the prompt is empty");
  for (int32_t t : r.prompt_ids)
    KILN_CHECK(t >= 0 && t < vocab_, "prompt token id {} is outside the vocabulary [0, {})", t,
               vocab_);
  engine::validate(r.sampling);
  for (const auto& [t, bias] : r.sampling.logit_bias) {
    KILN_CHECK(t < vocab_, "logit_bias token id {} is outside the vocabulary [0, {})", t, vocab_);
  }
  engine::validate(r.stop);
  if (r.sampling.json_schema && r.sampling.json_after.empty()) {
    // The constraint allows end of sequence only once the value is complete, and then nothing
    // else: a request that must not stop there could never finish.
    KILN_CHECK(!r.stop.ignore_eos, "ignore_eos cannot be combined with a JSON constraint");
    KILN_CHECK(r.stop.min_new_tokens == 0,
               "min_new_tokens cannot be combined with a JSON constraint");
  }
  for (int32_t t : r.stop.stop_token_ids)
    KILN_CHECK(t >= 0 && t < vocab_, "stop token id {} is outside the vocabulary [0, {})", t,
               vocab_);
  KILN_CHECK(r.logprobs >= -1 && r.logprobs <= 1024, "logprobs must be in [-1, 1024], got {}",
             r.logprobs);
  KILN_CHECK(r.prompt_logprobs_from >= -1 &&
                 r.prompt_logprobs_from <= static_cast<int64_t>(r.prompt_ids.size()),
             "the prompt logprob start {} is outside [-1, {}] (the prompt's length)",
             r.prompt_logprobs_from, r.prompt_ids.size());
  const auto total = static_cast<int64_t>(r.prompt_ids.size()) + r.stop.max_new_tokens;
  KILN_CHECK(total <= context_limit_,
             "the prompt ({} tokens) plus max_new_tokens ({}) exceeds the context length ({})",
             r.prompt_ids.size(), r.stop.max_new_tokens, context_limit_);
  // A request that could not fit in the pool even alone would be preempted forever.
  KILN_CHECK(ceil_div(total, page_size_) <= pool_->n_pages(),
             "the prompt ({} tokens) plus max_new_tokens ({}) exceeds the KV cache capacity ({} "
             "tokens)",
             r.prompt_ids.size(), r.stop.max_new_tokens, pool_->n_pages() * page_size_);
}

void Scheduler::add(uint64_t id, GenerateRequest request, EventCallback on_event, uint64_t seed) {
  auto seq = std::make_unique<Sequence>(id, next_arrival_++, std::move(request),
                                        std::move(on_event), seed, *tokenizer_, eog_ids_);
  stats_.prompt_tokens_total += seq->n_prompt;
  if (seq->request.stop.max_new_tokens == 0 && !seq->scoring()) {  // nothing to compute
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

void Scheduler::emit(Sequence& seq, RequestEvent& ev) {
  ev.request_id = seq.id;
  ev.prompt_tokens = static_cast<int>(seq.n_prompt);
  ev.completion_tokens = static_cast<int>(seq.generated());
  ev.cached_tokens = std::max(seq.cached_tokens, 0);
  if (config_.speculative.enabled()) {
    ev.spec_verify_ct = seq.spec_verify_ct;
    ev.spec_proposed = seq.spec_proposed;
    ev.spec_accepted = seq.spec_accepted;
  }
  if (!seq.on_event) return;
  try {
    seq.on_event(ev);
  } catch (const std::exception& e) {
    // A failing consumer must not take the scheduler down with it.
    KILN_LOG_ERROR("request {}: event callback threw: {}", seq.id, e.what());
  } catch (...) {
    KILN_LOG_ERROR("request {}: event callback threw", seq.id);
  }
}

void Scheduler::finish(Sequence& seq, RequestEvent& ev) {
  ev.finished = true;
  try {
    release(seq, /*to_cache=*/ev.error.empty());
  } catch (const std::exception& e) {
    // Only a bookkeeping bug gets here; the client still gets its final event.
    KILN_LOG_ERROR("request {}: releasing its KV pages failed: {}", seq.id, e.what());
  }
  if (draft_model_) draft_model_->release(seq.id);  // a preempted request keeps its draft
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
  if (cache_) cache_->flush();
  return true;
}

EngineStats Scheduler::stats() const {
  EngineStats s = stats_;
  s.queued = static_cast<int64_t>(waiting_.size());
  s.running = static_cast<int64_t>(running_.size());
  s.kv_pages_total = pool_->n_pages();
  s.kv_pages_used = pool_->used_pages();
  s.kv_pages_cached = cache_ ? cache_->evictable_pages() : 0;
  const JsonMaskCache::Stats masks = masks_.cache_stats();
  s.json_mask_hits = static_cast<int64_t>(masks.hits);
  s.json_mask_misses = static_cast<int64_t>(masks.misses);
  return s;
}

// ---- memory --------------------------------------------------------------------------------

void Scheduler::release(Sequence& seq, bool to_cache) {
  if (seq.state == Sequence::State::Waiting) return;  // holds nothing
  size_t first_owned = seq.n_cached_pages;
  if (cache_ && to_cache) {
    // Hand every fully computed page to the prefix cache (duplicates of cached pages are
    // freed by insert and replaced in our table).
    const auto n_full = static_cast<size_t>(seq.n_kv / page_size_);
    if (n_full > 0) {
      RadixCache::Node* node = cache_->insert(
          std::span<const int32_t>(seq.tokens.data(), n_full * static_cast<size_t>(page_size_)),
          std::span<int32_t>(seq.pages.data(), n_full));
      (void)node;
      first_owned = std::max(first_owned, n_full);
    }
  }
  if (cache_) cache_->unlock(seq.node);
  std::vector<int32_t> owned(seq.pages.begin() + static_cast<ptrdiff_t>(first_owned),
                             seq.pages.end());
  pool_->free(owned);  // NOLINT(clang-analyzer-unix.Malloc): KvPool::free, not libc's
  seq.pages.clear();
  seq.n_cached_pages = 0;
  seq.node = nullptr;
  seq.n_kv = 0;
  seq.state = Sequence::State::Waiting;
}

void Scheduler::cache_computed_prefix(Sequence& seq) {
  // Publish newly completed full pages so that concurrent requests with the same prefix
  // share them right away (a shared system prompt is then prefilled once).
  if (!cache_) return;
  const auto n_full = static_cast<size_t>(seq.n_kv / page_size_);
  if (n_full <= seq.n_cached_pages) return;
  RadixCache::Node* node = cache_->insert(
      std::span<const int32_t>(seq.tokens.data(), n_full * static_cast<size_t>(page_size_)),
      std::span<int32_t>(seq.pages.data(), n_full));
  cache_->lock(node);
  cache_->unlock(seq.node);
  seq.node = node;
  seq.n_cached_pages = n_full;
}

int64_t Scheduler::matchable_tokens(const Sequence& seq) {
  // Never the last token: its logits are needed, so at least one row must run. Nor any row
  // whose logits score a prompt token not yet scored: cached rows have none.
  return seq.scoring() ? seq.next_scoring_row() : static_cast<int64_t>(seq.tokens.size()) - 1;
}

bool Scheduler::admit(Sequence& seq) {
  RadixCache::Match match;
  const auto n_tokens = static_cast<int64_t>(seq.tokens.size());
  if (cache_) {
    match =
        cache_->match_prefix(std::span<const int32_t>(seq.tokens.data(), matchable_tokens(seq)));
    cache_->lock(match.node);
  }
  const int64_t need = ceil_div(n_tokens, page_size_) - static_cast<int64_t>(match.pages.size());
  // Headroom: every decoding request may need a fresh page at the next decode step; admitting
  // into that headroom would only cause a preemption right after.
  int64_t headroom = 0;
  for (const auto& r : running_) headroom += r->state == Sequence::State::Decoding ? 1 : 0;
  const int64_t available = pool_->free_pages() + (cache_ ? cache_->evictable_pages() : 0);
  if (need + headroom > available) {
    if (cache_) cache_->unlock(match.node);
    return false;
  }
  if (pool_->free_pages() < need) cache_->evict(need - pool_->free_pages());
  seq.pages = std::move(match.pages);
  const bool ok = pool_->alloc(need, seq.pages);
  KILN_CHECK(ok, "KV pool accounting error: {} pages promised but not free", need);
  seq.n_cached_pages = seq.pages.size() - static_cast<size_t>(need);
  seq.node = match.node;
  seq.n_kv = match.n_tokens;
  seq.state = Sequence::State::Prefilling;
  if (seq.cached_tokens < 0) seq.cached_tokens = static_cast<int>(match.n_tokens);
  stats_.prefix_cache_hit_tokens += match.n_tokens;
  stats_.prefix_cache_query_tokens += n_tokens;
  return true;
}

std::vector<Sequence*> Scheduler::admission_order() {
  std::vector<ScheduleTicket> tickets;
  tickets.reserve(waiting_.size());
  for (const auto& w : waiting_) tickets.push_back(w->ticket);
  const std::vector<size_t> order =
      engine::admission_order(config_.schedule, tickets, [&](size_t i) -> int64_t {
        if (!cache_) return 0;
        const Sequence& seq = *waiting_[i];
        return cache_->cached_prefix_tokens(
            std::span<const int32_t>(seq.tokens.data(), matchable_tokens(seq)));
      });
  std::vector<Sequence*> out;
  out.reserve(order.size());
  for (size_t i : order) out.push_back(waiting_[i].get());
  return out;
}

void Scheduler::preempt_least_protected() {
  Sequence& victim = *running_.back();
  KILN_LOG_DEBUG("preempting request {} ({} tokens computed)", victim.id, victim.n_kv);
  release(victim, /*to_cache=*/true);
  insert_waiting(take(victim));
  ++stats_.preemptions;
}

bool Scheduler::ensure_decode_page(Sequence& seq) {
  // The new token goes to position n_kv; grow the block table until it covers it.
  while (static_cast<int64_t>(seq.pages.size()) * page_size_ <= seq.n_kv) {
    if (pool_->free_pages() == 0 && cache_) cache_->evict(1);
    if (pool_->free_pages() == 0) {
      const bool self = running_.back().get() == &seq;
      preempt_least_protected();
      if (self) return false;
      continue;
    }
    pool_->alloc(1, seq.pages);
  }
  return true;
}

// ---- steps ---------------------------------------------------------------------------------

bool Scheduler::step() {
  auto has_prefill_work = [&] {
    if (!waiting_.empty()) return true;
    for (const auto& r : running_)
      if (r->state == Sequence::State::Prefilling) return true;
    return false;
  };
  const bool decode_ready = has_decoding();
  if (has_prefill_work()) {
    if (decode_ready && config_.mixed_steps) {
      // A mixed step: the decode rows ride along with the prefill chunk, so every decoding
      // request gets its token in this step instead of waiting for the next one. When no
      // prompt rows fit (no pages to admit anyone), it is a plain decode step below.
      if (ensure_decode_pages() && prefill_step(/*decoding=*/true, /*with_decode_rows=*/true))
        return true;
    } else if (!(last_step_was_prefill_ && decode_ready)) {
      if (prefill_step(decode_ready, /*with_decode_rows=*/false)) {
        last_step_was_prefill_ = true;
        return true;
      }
    }
  }
  last_step_was_prefill_ = false;
  if (decode_ready) return decode_step();
  return false;
}

bool Scheduler::has_decoding() const {
  for (const auto& r : running_)
    if (r->state == Sequence::State::Decoding) return true;
  return false;
}

bool Scheduler::ensure_decode_pages() {
  // Most protected first, so that preemption (which takes the least protected, running_.back())
  // favors them.
  for (size_t i = 0; i < running_.size(); ++i) {
    Sequence& seq = *running_[i];
    if (seq.state != Sequence::State::Decoding) continue;
    if (!ensure_decode_page(seq)) break;  // seq itself was the least protected: preempted
  }
  return has_decoding();
}

void Scheduler::add_decode_rows(StepBatch& batch, std::vector<Sequence*>& members,
                                bool with_proposals) {
  int64_t decoding = 0;
  for (const auto& r : running_) decoding += r->state == Sequence::State::Decoding ? 1 : 0;
  const bool speculate =
      with_proposals && config_.speculative.enabled() && decoding <= config_.speculative.max_batch;
  if (speculate) {
    std::vector<Sequence*> proposing;
    std::vector<int64_t> budgets;
    for (auto& r : running_) {
      if (r->state != Sequence::State::Decoding) continue;
      r->draft.clear();
      const int64_t k = proposal_budget(*r);
      if (k <= 0) continue;
      proposing.push_back(r.get());
      budgets.push_back(k);
    }
    cap_budgets(proposing, budgets, decoding - static_cast<int64_t>(proposing.size()));
    propose(proposing, budgets);
  }
  for (auto& r : running_) {
    if (r->state != Sequence::State::Decoding) continue;
    Sequence& seq = *r;
    if (!speculate) seq.draft.clear();
    const auto s = static_cast<int32_t>(batch.seqs.size());
    const auto n_rows = static_cast<int64_t>(seq.draft.size()) + 1;
    for (int64_t j = 0; j < n_rows; ++j) {
      const int64_t pos = seq.n_kv + j;
      batch.token_ids.push_back(j == 0 ? seq.tokens.back() : seq.draft[static_cast<size_t>(j - 1)]);
      batch.positions.push_back(static_cast<int32_t>(pos));
      batch.token_seq.push_back(s);
      batch.slots.push_back(seq.pages[static_cast<size_t>(pos / page_size_)] * page_size_ +
                            static_cast<int32_t>(pos % page_size_));
    }
    StepSequence ss;
    ss.pages = seq.pages;
    ss.seq_len = static_cast<int32_t>(seq.n_kv + n_rows);
    ss.all_logits = n_rows > 1;  // a verify step needs the model's token after every row
    batch.seqs.push_back(std::move(ss));
    members.push_back(&seq);
  }
}

bool Scheduler::prefill_step(bool decoding, bool with_decode_rows) {
  StepBatch batch;
  std::vector<Sequence*> members;
  // No proposals beside a prompt chunk: the chunk makes the step compute bound, where every
  // proposal row is paid in full.
  if (with_decode_rows) add_decode_rows(batch, members, /*with_proposals=*/false);
  const size_t decode_members = members.size();
  int64_t budget = config_.max_prefill_tokens;
  if (decoding && config_.max_prefill_tokens_while_decoding > 0)
    budget = std::min<int64_t>(budget, config_.max_prefill_tokens_while_decoding);
  auto add_chunk = [&](Sequence& seq) {
    const int64_t remaining = static_cast<int64_t>(seq.tokens.size()) - seq.n_kv;
    int64_t take =
        std::min({remaining, static_cast<int64_t>(config_.chunked_prefill_size), budget});
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
    const auto s = static_cast<int32_t>(batch.seqs.size());
    for (int64_t i = 0; i < take; ++i) {
      const int64_t pos = seq.n_kv + i;
      batch.token_ids.push_back(seq.tokens[static_cast<size_t>(pos)]);
      batch.positions.push_back(static_cast<int32_t>(pos));
      batch.token_seq.push_back(s);
      batch.slots.push_back(seq.pages[static_cast<size_t>(pos / page_size_)] * page_size_ +
                            static_cast<int32_t>(pos % page_size_));
    }
    StepSequence ss;
    ss.pages = seq.pages;
    ss.seq_len = static_cast<int32_t>(seq.n_kv + take);
    ss.want_logits = all_logits || seq.n_kv + take == static_cast<int64_t>(seq.tokens.size());
    ss.all_logits = all_logits;
    batch.seqs.push_back(std::move(ss));
    members.push_back(&seq);
    budget -= take;
  };
  for (auto& r : running_) {
    if (budget <= 0) break;
    if (r->state == Sequence::State::Prefilling) add_chunk(*r);
  }
  const auto has_room = [&] {
    return budget > 0 && static_cast<int64_t>(running_.size()) < config_.max_running_requests;
  };
  if (has_room() && !waiting_.empty()) {
    for (Sequence* seq : admission_order()) {
      if (!has_room()) break;
      // The first that does not fit stops admission: nobody overtakes it for lack of pages,
      // so big requests are not starved.
      if (!admit(*seq)) break;
      insert_running(take(*seq));
      for (auto& w : waiting_) count_overtaken(seq->ticket, w->ticket);
      add_chunk(*seq);
    }
  }
  if (members.size() == decode_members) return false;  // no prompt rows: not a prefill step
  if (decode_members > 0) ++stats_.mixed_steps;
  run_batch(batch, members, decode_members > 0 ? BatchRows::PromptAndDecode : BatchRows::Prompt);
  return true;
}

bool Scheduler::decode_step() {
  if (!ensure_decode_pages()) return false;
  StepBatch batch;
  std::vector<Sequence*> members;
  add_decode_rows(batch, members, /*with_proposals=*/true);
  if (members.empty()) return false;
  run_batch(batch, members, BatchRows::Decode);
  return true;
}

}  // namespace kiln::engine
