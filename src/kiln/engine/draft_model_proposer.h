// Proposals from a draft model (SGLang's STANDALONE speculative algorithm, llama.cpp's
// --model-draft): a smaller model with the same vocabulary continues each request greedily for
// k tokens, and the target model verifies them in one step (scheduler.h).
//
// The draft model has its own executor (its own captured plans) and its own KV pool. Per
// request this keeps the draft pages and the tokens whose K/V they hold; a round first feeds the
// draft what it has not seen (the tokens verified since its last round, usually one or two; the
// whole prompt on the first round, in chunks) and takes its token after the last one, then runs
// k - 1 decode steps, every proposing request in the same steps. Rejected proposals need no
// cleanup: the next round keeps only the prefix the draft cache shares with the request.
//
// The draft never evicts anything: a request whose pages the draft pool cannot hold gets fewer
// proposals or none, and a failed draft step costs the round's proposals, never the request.
#pragma once
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "kiln/engine/kv_pool.h"
#include "kiln/engine/step_batch.h"

namespace kiln::model {
class Tokenizer;
}

namespace kiln::engine {

struct DraftWant {
  uint64_t id = 0;
  std::span<const int32_t> tokens;      // the request's tokens so far (prompt and output)
  int max_tokens = 0;                   // proposals wanted, >= 1
  std::vector<int32_t>* out = nullptr;  // receives up to max_tokens proposals
};

class DraftModelProposer {
 public:
  // Prompt rows fed to the draft per request and step while it catches up.
  static constexpr int64_t kCatchUpChunk = 512;

  DraftModelProposer(ModelExecutor& draft, KvPool& pool);
  ~DraftModelProposer();  // returns every page
  DraftModelProposer(const DraftModelProposer&) = delete;
  DraftModelProposer& operator=(const DraftModelProposer&) = delete;

  // Fills each want's `out` with the draft model's greedy continuation (cleared first).
  void propose(std::span<DraftWant> wants);
  // Forgets a request (finished or aborted): its draft pages go back to the pool.
  void release(uint64_t id);

  int64_t requests() const { return static_cast<int64_t>(states_.size()); }
  int64_t steps() const { return steps_; }  // draft forward steps run
  // Seconds per draft step of a round, a moving average over the rounds that fed no prompt
  // chunk (a round's first step feeds a few verified tokens, the others one token each); 0
  // before the first such round. What the speculation policy charges per proposal position.
  double step_seconds() const { return step_seconds_; }
  int64_t failed_rounds() const { return failed_rounds_; }

 private:
  struct State {
    std::vector<int32_t> pages;
    std::vector<int32_t> kv_tokens;  // the tokens whose K/V the pages hold, in order
  };
  struct Active {
    const DraftWant* want;
    State* state;
    int max_tokens;
  };
  // Keeps the cached prefix the request still has and gives it pages for this round; false
  // (state released) when not even the catch-up fits.
  bool prepare(const DraftWant& want, State& state, int& max_tokens);
  void add_rows(StepBatch& batch, State& state, std::span<const int32_t> tokens, bool want_logits,
                bool all_logits);
  void run(StepBatch& batch, StepOutput& out);
  void round(std::vector<Active>& active);

  ModelExecutor* draft_;
  KvPool* pool_;
  int page_size_;
  std::unordered_map<uint64_t, State> states_;
  StepOutput output_;
  int64_t steps_ = 0;
  int64_t failed_rounds_ = 0;
  double step_seconds_ = 0.0;
};

// Throws kiln::Error unless the two tokenizers have the same vocabulary (every id the same
// piece) and the two models the same output width: a draft model's token ids must mean what
// the target's mean.
void check_draft_vocabulary(const model::Tokenizer& target, int64_t target_vocab,
                            const model::Tokenizer& draft, int64_t draft_vocab);

}  // namespace kiln::engine
