// The continuous-batching scheduler, single-threaded: Engine runs it on its own thread and
// feeds it submissions and cancellations between steps; tests drive it directly.
//
// Embedding requests (request.hidden) are prompts that end in hidden states instead of tokens:
// their chunks are admitted, budgeted, preempted and mixed with decode rows as any prompt's,
// and they finish when their last prompt row has run.
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
// the step's budget (admission_budget.h) stops admission for the step.
//
// Memory (sequence_pages.h): admission reserves pages for every token the request must (re)compute;
// decoding grows one page at a time. When no page is free the prefix cache evicts LRU leaves, and
// failing that the least protected running request (lowest priority, then youngest) is
// preempted: its computed full pages go to the prefix cache, the rest back to the pool, and it
// is requeued (ahead of newer requests) with its generated tokens, which are re-prefilled
// later. The client sees no duplicates: the sampler and stop-checker state survive the
// preemption.
//
// The scheduler composes units that are tested on their own: the request record (sequence.h),
// its KV pages (sequence_pages.h), the admission budget (admission_budget.h), the token
// emitter that turns a step's rows into tokens and events (token_emitter.h), speculative
// decoding (speculation.h, over speculation_policy.h) and the JSON constraint's cursor
// (json/constraint_cursor.h, its masks in constraint_masks.h).
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "kiln/engine/constraint_masks.h"
#include "kiln/engine/engine_config.h"
#include "kiln/engine/forward_pass.h"
#include "kiln/engine/kv_pool.h"
#include "kiln/engine/radix_cache.h"
#include "kiln/engine/request.h"
#include "kiln/engine/sequence_pages.h"
#include "kiln/engine/speculation.h"
#include "kiln/engine/speculative_resources.h"
#include "kiln/engine/step_batch.h"
#include "kiln/engine/token_emitter.h"
#include "kiln/engine/token_text.h"

namespace kiln::engine {

class Scheduler {
 public:
  // Prompt rows scored per step and sequence: each returns a full logits row (1 MiB on a
  // 262144-token vocabulary).
  static constexpr int64_t kScoringChunkRows = 32;

  // `speculative`: the draft model and test hooks for config.speculative (speculative_resources.h).
  Scheduler(ModelExecutor& executor, KvPool& pool, const TokenText& tokenizer,
            const EngineConfig& config, const SpeculativeResources& speculative = {});
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
  const RadixCache* prefix_cache() const { return pages_.prefix_cache(); }
  int64_t context_limit() const { return context_limit_; }

 private:
  // `with_decode_rows`: the decoding requests' rows join this step (a mixed step). While
  // requests decode the prompt tokens are capped (admission_budget.h). False when no prompt
  // rows could be added.
  bool prefill_step(bool with_decode_rows);
  bool decode_step();
  int64_t decoding_count() const;
  // Gives every decoding request a page for its next token, preempting the least protected
  // requests when the pool runs out; false when no request is left decoding.
  bool ensure_decode_pages();
  // One row per decoding request: its last token at position n_kv, followed by the tokens
  // proposed for it when it speculates (one row each, all rows' outputs returned; only in
  // steps `with_proposals`: pure decode steps).
  void add_decode_rows(StepBatch& batch, std::vector<Sequence*>& members, bool with_proposals);
  // A prompt chunk of `seq` within `budget` (scoring rows in chunks of their own).
  void add_prompt_chunk(StepBatch& batch, std::vector<Sequence*>& members, Sequence& seq,
                        AdmissionBudget& budget);
  // The waiting requests in the order admission tries them (schedule_policy.h).
  std::vector<Sequence*> admission_order();
  void preempt_least_protected();  // running_.back(): running_ is kept most protected first
  // Runs the batch (forward_pass.h) and hands each member its outputs; `members` are the
  // batch's sequences in order.
  void run_batch(StepBatch& batch, const std::vector<Sequence*>& members, ForwardPass::Rows rows);
  // A prompt chunk's or plain decode row's outputs: prompt scores, then (at the sequence's end)
  // its next token.
  void take_plain_outputs(Sequence& seq, const StepSequence& ss, int64_t first_row, int64_t n_rows,
                          int64_t batch_rows, bool greedy);
  // A verify step's outputs for one request: the emitter takes the model's token after each
  // row while the proposals agree with it; K/V is kept for the accepted rows only.
  void take_verify_outputs(Sequence& seq, int64_t first_row, bool greedy);
  // An embedding request's rows [first_row, first_row + n_rows) of this step's hidden states
  // (batch_rows rows in the step); finishes it once its whole prompt has run.
  void take_hidden_outputs(Sequence& seq, const StepSequence& ss, int64_t first_row, int64_t n_rows,
                           int64_t batch_rows);
  // Scores the prompt tokens that rows [first_row, first_row + n_rows) of this step's logits
  // predict (the sequence's rows, from position first_pos).
  void score_prompt_rows(Sequence& seq, int64_t first_pos, int64_t n_rows, int64_t first_row);
  void finish(Sequence& seq, RequestEvent& event);  // emits the final event and frees seq
  void emit(Sequence& seq, RequestEvent& event) {
    TokenEmitter::deliver(seq, event, speculation_.enabled());
  }
  void insert_running(std::unique_ptr<Sequence> seq);
  void insert_waiting(std::unique_ptr<Sequence> seq);
  std::unique_ptr<Sequence> take(Sequence& seq);  // removes it from waiting_ or running_

  const TokenText* tokenizer_;
  EngineConfig config_;
  int64_t vocab_;
  int64_t context_limit_;
  std::vector<int32_t> eog_ids_;
  SequencePages pages_;
  std::deque<std::unique_ptr<Sequence>> waiting_;   // by arrival
  std::vector<std::unique_ptr<Sequence>> running_;  // most protected first (protected_before)
  bool last_step_was_prefill_ = false;
  uint64_t next_arrival_ = 0;
  ConstraintMasks masks_;  // JSON constraints' token masks, cached and computed off the step
  ForwardPass forward_;
  TokenEmitter emitter_;
  Speculation speculation_;
  EngineStats stats_;
};

}  // namespace kiln::engine
