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
#include "kiln/engine/stop_checker.h"

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

namespace {
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
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

void Scheduler::score_prompt_rows(Sequence& seq, int64_t first_pos, int64_t n_rows,
                                  int64_t first_row) {
  // Row j holds position first_pos + j and predicts the token at first_pos + j + 1.
  const int top = std::max(seq.request.logprobs, 0);
  for (int64_t j = 0; j < n_rows; ++j) {
    const int64_t target = first_pos + j + 1;
    if (target != seq.score_from + static_cast<int64_t>(seq.scores.size()) ||
        target >= seq.n_prompt)
      continue;
    std::span<const float> logits(output_.logits.data() + (first_row + j) * vocab_,
                                  static_cast<size_t>(vocab_));
    seq.scores.push_back(score_token(logits, seq.tokens[static_cast<size_t>(target)], top));
  }
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

void Scheduler::prefetch_masks(const StepBatch& batch, const std::vector<Sequence*>& members) {
  std::vector<ConstraintMasks::Row> rows;
  for (size_t i = 0; i < members.size(); ++i) {
    const Sequence& seq = *members[i];
    const StepSequence& ss = batch.seqs[i];
    // Only rows that sample: the sequence's last row, once the step reaches its end.
    if (!seq.json || !ss.want_logits || ss.seq_len < static_cast<int64_t>(seq.tokens.size())) {
      continue;
    }
    rows.push_back({*seq.json, seq.json_end_ids});
    // Verify row j samples after the first j proposals (when they were accepted): the states
    // along the draft. A proposal the constraint refuses ends the path (it is not accepted).
    JsonMatcher along = *seq.json;
    for (int32_t proposal : seq.draft) {
      const std::optional<std::string> bytes = tokenizer_->token_bytes(proposal);
      if (!bytes || !along.feed(*bytes) || along.complete()) break;
      rows.push_back({along, seq.json_end_ids});
    }
  }
  masks_.prefetch(std::move(rows));
}

// Opens the constraint when the output reaches one of sampling.json_after. Bytes of the same token
// after the marker start the value; where they cannot, this value goes unconstrained (the
// token is already chosen) and the marker is looked for again.
void Scheduler::watch_json_marker(Sequence& seq, int32_t token) {
  // The markers as the output shows them: with skip_special_tokens false a control token's text
  // counts ("[TOOL_CALLS]" is one in Mistral's vocabularies).
  const size_t before = seq.json_tail.size();
  tokenizer_->append_token_text(token, seq.request.skip_special_tokens, seq.json_tail);
  if (seq.json_tail.size() == before) return;
  // The marker that ends last (markers may overlap: the latest one opens the value).
  size_t value_at = std::string::npos, longest = 0;
  for (const std::string& marker : seq.request.sampling.json_after) {
    longest = std::max(longest, marker.size());
    const size_t at = seq.json_tail.rfind(marker);
    if (at != std::string::npos &&
        (value_at == std::string::npos || at + marker.size() > value_at)) {
      value_at = at + marker.size();
    }
  }
  if (value_at == std::string::npos) {
    if (seq.json_tail.size() >= longest) {
      seq.json_tail.erase(0, seq.json_tail.size() - (longest - 1));
    }
    return;
  }
  const std::string rest = seq.json_tail.substr(value_at);
  seq.json_tail.clear();
  seq.json.emplace(seq.request.sampling.json_schema, /*leading_space=*/true);
  if (!seq.json->feed(rest) || seq.json->complete()) seq.json.reset();
}

void Scheduler::constrain_to_json(Sequence& seq, std::span<float> logits) {
  const std::shared_ptr<const TokenMask> mask = masks_.mask(*seq.json, seq.json_end_ids);
  KILN_CHECK(mask->allowed_count() > 0,
             "the JSON constraint allows no token of this vocabulary here");
  mask->apply(logits);
}

void Scheduler::run_batch(StepBatch& batch, const std::vector<Sequence*>& members, BatchRows rows) {
  // Greedy fast path: the LM head then only returns argmax ids.
  bool greedy_only = true;
  const int64_t n_logits = batch.logit_rows();
  std::vector<int64_t> rows_of(members.size(), 0);
  for (int32_t s : batch.token_seq) ++rows_of[static_cast<size_t>(s)];
  for (size_t i = 0; i < members.size(); ++i) {
    if (!batch.seqs[i].want_logits) continue;
    // Verify rows (proposals) want the argmax of every row: greedy ids serve them too.
    const bool scoring = batch.seqs[i].all_logits && members[i]->draft.empty();
    greedy_only &= !scoring && members[i]->sampler.greedy_fast_path_ok() &&
                   members[i]->stop.banned_ids().empty();
  }
  batch.greedy_only = greedy_only && n_logits > 0;

  output_.logits.clear();
  output_.greedy_ids.clear();
  output_.vocab = 0;
  output_.used_graph = false;
  std::string error;
  const auto start = std::chrono::steady_clock::now();
  prefetch_masks(batch, members);
  try {
    executor_->forward(batch, output_);
    const double forward_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // The mask time the forward pass did not hide is part of what the step's rows cost (the
    // speculation policy prices verify rows with it).
    const double mask_wait = masks_.finish();
    stats_.json_mask_wait_seconds += mask_wait;
    const double seconds = forward_seconds + mask_wait;
    // Decode and verify steps (every row returns a token) teach the speculation policy what
    // rows cost; without speculation nobody reads it.
    if (config_.speculative.enabled() && batch.returns_every_row())
      step_costs_.record(batch.num_tokens(), seconds);
    const bool graph = output_.used_graph;
    const StepKind kind = rows == BatchRows::Prompt            ? StepKind::Prefill
                          : rows == BatchRows::PromptAndDecode ? StepKind::Mixed
                          : batch.is_decode()
                              ? (graph ? StepKind::DecodeGraph : StepKind::DecodeEager)
                              : (graph ? StepKind::VerifyGraph : StepKind::VerifyEager);
    StepTime& t = stats_.step_time[static_cast<size_t>(kind)];
    ++t.steps;
    t.rows += batch.num_tokens();
    t.seconds += seconds;
    if (batch.greedy_only) {
      KILN_CHECK(static_cast<int64_t>(output_.greedy_ids.size()) == n_logits,
                 "the executor returned {} greedy ids for {} rows", output_.greedy_ids.size(),
                 n_logits);
    } else {
      KILN_CHECK(output_.vocab == vocab_ &&
                     static_cast<int64_t>(output_.logits.size()) == n_logits * vocab_,
                 "the executor returned {} logits of vocab {} for {} rows of vocab {}",
                 output_.logits.size(), output_.vocab, n_logits, vocab_);
    }
  } catch (const std::exception& e) {
    masks_.finish();
    error = e.what();
  }
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
  if (output_.used_graph) {
    ++stats_.graph_steps;
  } else {
    ++stats_.eager_steps;
  }

  int64_t next_row = 0;
  for (size_t i = 0; i < members.size(); ++i) {
    Sequence& seq = *members[i];
    const StepSequence& ss = batch.seqs[i];
    // This sequence's logits rows: none, its last row, or (scoring) all its rows, the last of
    // which predicts the token after the prompt.
    const int64_t n_rows = !ss.want_logits ? 0 : ss.all_logits ? rows_of[i] : 1;
    const int64_t first_row = next_row;
    next_row += n_rows;
    if (!seq.draft.empty()) {
      accept_proposals(seq, first_row, n_rows, batch.greedy_only);
      continue;
    }
    if (config_.speculative.enabled() && seq.state == Sequence::State::Decoding)
      ++seq.spec_verify_ct;
    seq.n_kv = ss.seq_len;
    if (ss.all_logits) {
      try {
        score_prompt_rows(seq, ss.seq_len - rows_of[i], rows_of[i], first_row);
      } catch (const std::exception& e) {
        RequestEvent ev;
        ev.finish_reason = FinishReason::Abort;
        ev.error = std::string("scoring the prompt failed: ") + e.what();
        finish(seq, ev);
        continue;
      }
    }
    // Only a step that reaches the end of the sequence samples.
    if (n_rows == 0 || seq.n_kv < static_cast<int64_t>(seq.tokens.size())) {
      cache_computed_prefix(seq);
      continue;
    }
    const int64_t r = first_row + n_rows - 1;
    seq.state = Sequence::State::Decoding;
    cache_computed_prefix(seq);
    RequestEvent ev;
    if (!seq.scores_sent) {
      ev.prompt_logprobs = std::move(seq.scores);
      seq.scores_sent = true;
    }
    if (seq.request.stop.max_new_tokens == 0) {  // scoring only
      ev.finish_reason = FinishReason::Length;
      finish(seq, ev);
      continue;
    }
    int32_t token = 0;
    try {
      if (batch.greedy_only) {
        token = output_.greedy_ids[static_cast<size_t>(r)];
        KILN_CHECK(token >= 0 && token < vocab_, "the executor returned token id {}", token);
      } else {
        std::span<float> logits(output_.logits.data() + r * vocab_, static_cast<size_t>(vocab_));
        if (seq.json) constrain_to_json(seq, logits);
        TokenLogprob lp;
        token = seq.sampler.sample(logits, seq.stop.banned_ids(),
                                   seq.request.logprobs >= 0 ? &lp : nullptr);
        if (seq.request.logprobs >= 0) ev.logprobs.push_back(std::move(lp));
      }
    } catch (const std::exception& e) {
      ev.finish_reason = FinishReason::Abort;
      ev.error = std::string("sampling failed: ") + e.what();
      finish(seq, ev);
      continue;
    }
    if (!feed_json(seq, token)) {  // the mask allowed it: cannot happen
      ev.finish_reason = FinishReason::Abort;
      ev.error = fmt::format("internal error: token {} broke the JSON constraint", token);
      finish(seq, ev);
      continue;
    }
    seq.tokens.push_back(token);
    seq.sampler.add_output(token);
    ++stats_.generated_tokens_total;
    StopUpdate u = seq.stop.on_token(token);
    ev.new_tokens.push_back(token);
    ev.text_delta = std::move(u.text_delta);
    if (u.finished) {
      ev.finish_reason = u.reason;
      ev.matched_stop = std::move(u.matched_stop);
      ev.matched_stop_token = u.matched_stop_token;
      finish(seq, ev);
    } else {
      emit(seq, ev);
    }
  }
}

bool Scheduler::feed_json(Sequence& seq, int32_t token) {
  const bool after_marker = !seq.request.sampling.json_after.empty();
  if (!seq.json) {
    // A constraint that waits for its marker: this token may complete the marker.
    if (after_marker) watch_json_marker(seq, token);
    return true;
  }
  const bool ends =
      std::find(seq.json_end_ids.begin(), seq.json_end_ids.end(), token) != seq.json_end_ids.end();
  if (ends) return true;
  const std::optional<std::string> bytes = tokenizer_->token_bytes(token);
  if (!bytes || !seq.json->feed(*bytes)) return false;
  // After a marker, the constraint lifts once its value is complete (the next marker opens it
  // again).
  if (after_marker && seq.json->complete()) seq.json.reset();
  return true;
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
