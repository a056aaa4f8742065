// The continuous-batching scheduler, single-threaded: Engine runs it on its own thread and
// feeds it submissions and cancellations between steps; tests drive it directly.
//
// Step policy: a PREFILL step takes chunks of prompts (requests admitted earlier whose
// prefill is unfinished, then newly admitted ones, up to chunked_prefill_size tokens per
// request and max_prefill_tokens in all); a DECODE step takes one token for every decoding
// request. While requests decode and prompts wait, steps are MIXED (config.mixed_steps, the
// default): one token of every decoding request rides along with a prefill chunk of at most
// max_prefill_tokens_while_decoding prompt tokens, so decoding never pauses for a prefill and
// the weights are read once for both. Pure decode steps (no prompt waiting) are what the graph
// runner replays its captured plans for; a mixed step runs eagerly, and since every kernel is
// batch-invariant a decode row's output is the same bits in either. Without mixed steps,
// prefill and decode steps alternate whenever both have work: a running request waits at most
// one (capped) prefill step per token.
//
// Admission: waiting requests are tried in the order the schedule policy gives
// (schedule_policy.h: fcfs or lpm, priorities, a bounded wait), and the first that does not fit
// stops admission for the step.
//
// Memory: admission reserves pages for every token the request must (re)compute; decoding
// grows one page at a time. When no page is free the prefix cache evicts LRU leaves, and
// failing that the least protected running request (lowest priority, then youngest) is
// preempted: its computed full pages go to the prefix cache, the rest back to the pool, and it
// is requeued (ahead of newer requests) with its generated tokens, which are re-prefilled
// later. The client sees no duplicates: the sampler and stop-checker state survive the
// preemption.
#pragma once
#include <algorithm>
#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/engine/constraint_masks.h"
#include "kiln/engine/engine_config.h"
#include "kiln/engine/kv_pool.h"
#include "kiln/engine/radix_cache.h"
#include "kiln/engine/request.h"
#include "kiln/engine/schedule_policy.h"
#include "kiln/engine/speculation_policy.h"
#include "kiln/engine/step_batch.h"
#include "kiln/engine/token_text.h"

namespace kiln::engine {

struct Sequence;
class DraftModelProposer;

// Verify steps' outcomes as the speculation policy reads them (speculation_policy.h): how often
// the first proposal was kept, and a later one when the one before it was.
struct SpecRuns {
  double rounds = 0, first_hits = 0, next_trials = 0, next_hits = 0;
  void add(int64_t proposed, int64_t kept) {
    rounds += 1;
    first_hits += kept > 0 ? 1 : 0;
    next_trials += static_cast<double>(std::min(kept, proposed - 1));
    next_hits += static_cast<double>(std::max<int64_t>(kept - 1, 0));
  }
};

class Scheduler {
 public:
  // Prompt rows scored per step and sequence: each returns a full logits row (1 MiB on a
  // 262144-token vocabulary).
  static constexpr int64_t kScoringChunkRows = 32;

  Scheduler(ModelExecutor& executor, KvPool& pool, const TokenText& tokenizer,
            const EngineConfig& config);
  ~Scheduler();  // aborts whatever is left and returns every page
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Throws kiln::Error for a request the engine can never run. Thread-safe (reads only
  // configuration).
  void validate(const GenerateRequest& request) const;
  // Queues a validated request. `seed` seeds its sampler when the request carries none.
  void add(uint64_t id, GenerateRequest request, EventCallback on_event, uint64_t seed);
  // Aborts a queued or running request (finish_reason abort); unknown ids are ignored.
  void cancel(uint64_t id);
  // Runs one step. Returns false when there was nothing it could do.
  bool step();
  bool idle() const { return waiting_.empty() && running_.empty(); }
  // Aborts every request with `error` (empty: a plain abort).
  void abort_all(const std::string& error);
  // Drops every unpinned prefix-cache entry; false (and nothing dropped) while requests are
  // queued or running.
  bool flush_cache();
  EngineStats stats() const;

  // For tests.
  const RadixCache* prefix_cache() const { return cache_.get(); }
  int64_t context_limit() const { return context_limit_; }

 private:
  // `decoding`: requests are decoding (the prefill budget is capped); `with_decode_rows`: their
  // rows join this step (a mixed step). False when no prompt rows could be added.
  bool prefill_step(bool decoding, bool with_decode_rows);
  bool decode_step();
  bool has_decoding() const;
  // Gives every decoding request a page for its next token, preempting the least protected
  // requests when the pool runs out; false when no request is left decoding.
  bool ensure_decode_pages();
  // One row per decoding request: its last token at position n_kv, followed by the tokens
  // proposed for it when it speculates (one row each, all rows' outputs returned; only in
  // steps `with_proposals`: pure decode steps).
  void add_decode_rows(StepBatch& batch, std::vector<Sequence*>& members, bool with_proposals);
  // How many tokens the request may have proposed this step: 0 when it cannot speculate (not a
  // plain argmax, backing off, at its token limit).
  int64_t proposal_budget(Sequence& seq);
  // Fills each sequence's draft (n-gram lookup or the draft model) within its budget, then
  // gives the proposals pages: free pages only; rows past them drop off (speculation never
  // evicts or preempts).
  void propose(std::vector<Sequence*>& seqs, std::vector<int64_t>& budgets);
  // Caps the budgets where proposals would cost more than they are expected to give
  // (choose_proposal_cap); `plain_rows`: the step's decode rows that do not speculate.
  void cap_budgets(const std::vector<Sequence*>& seqs, std::vector<int64_t>& budgets,
                   int64_t plain_rows);
  // A verify step's outputs for one request: emits the model's token after each row while the
  // proposals agree with it (the first disagreement is replaced by the model's own token),
  // keeps the K/V of the accepted rows only, and returns the pages of the rest.
  void accept_proposals(Sequence& seq, int64_t first_row, int64_t n_rows, bool greedy_only);
  // The waiting requests in the order admission tries them (schedule_policy.h).
  std::vector<Sequence*> admission_order();
  // How much of the sequence the prefix cache may serve.
  static int64_t matchable_tokens(const Sequence& seq);
  bool admit(Sequence& seq);
  bool ensure_decode_page(Sequence& seq);
  void preempt_least_protected();  // running_.back(): running_ is kept most protected first
  // Runs the batch and handles its outputs; `members` are the batch's sequences in order.
  // What rows a batch holds, for the step-time statistics (decode steps: decode or verify rows).
  enum class BatchRows : uint8_t { Prompt, PromptAndDecode, Decode };
  void run_batch(StepBatch& batch, const std::vector<Sequence*>& members, BatchRows rows);
  void cache_computed_prefix(Sequence& seq);
  // Hands the states this batch's JSON-constrained rows will sample from to masks_, whose
  // worker computes their token masks while the forward pass runs.
  void prefetch_masks(const StepBatch& batch, const std::vector<Sequence*>& members);
  // Advances a JSON-constrained sequence's matcher past `token` (end ids end the value; after
  // a marker, a complete value lifts the constraint), or, while a constraint waits for its
  // marker (sampling.json_after), watches for it. False when the constraint refuses `token`.
  bool feed_json(Sequence& seq, int32_t token);
  // Sets the logits of every token the sequence's JSON constraint refuses to -inf; throws
  // kiln::Error when it allows none.
  void constrain_to_json(Sequence& seq, std::span<float> logits);
  // sampling.json_after: looks for the marker in the output and opens the constraint there.
  void watch_json_marker(Sequence& seq, int32_t token);
  // Scores the prompt tokens that rows [first_row, first_row + n_rows) of this step's logits
  // predict (the sequence's rows, from position first_pos).
  void score_prompt_rows(Sequence& seq, int64_t first_pos, int64_t n_rows, int64_t first_row);
  void release(Sequence& seq, bool to_cache);
  void finish(Sequence& seq, RequestEvent& event);  // emits the final event and frees seq
  void emit(Sequence& seq, RequestEvent& event);
  void insert_running(std::unique_ptr<Sequence> seq);
  void insert_waiting(std::unique_ptr<Sequence> seq);
  std::unique_ptr<Sequence> take(Sequence& seq);  // removes it from waiting_ or running_

  ModelExecutor* executor_;
  KvPool* pool_;
  const TokenText* tokenizer_;
  EngineConfig config_;
  int page_size_;
  int64_t vocab_;
  int64_t context_limit_;
  std::vector<int32_t> eog_ids_;
  std::unique_ptr<RadixCache> cache_;               // null when the prefix cache is disabled
  std::deque<std::unique_ptr<Sequence>> waiting_;   // by arrival
  std::vector<std::unique_ptr<Sequence>> running_;  // most protected first (protected_before)
  bool last_step_was_prefill_ = false;
  uint64_t next_arrival_ = 0;
  StepOutput output_;      // reused: logits rows can be large
  ConstraintMasks masks_;  // JSON constraints' token masks, cached and computed off the step
  std::unique_ptr<DraftModelProposer> draft_model_;  // --speculative-algorithm standalone
  StepCostModel step_costs_;                         // decode and verify steps' time by rows
  int64_t capped_steps_ = 0;                         // steps whose proposals the policy capped
  SpecRuns spec_runs_;                               // every request's verify steps
  EngineStats stats_;
};

}  // namespace kiln::engine
