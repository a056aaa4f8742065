// Drives a ModelExecutor directly, without the scheduler: sequences with their own KV pages,
// prefill of many tokens in one step, decode steps over several sequences. For tools that need
// every position's logits (`kiln logits`) and for model-level tests.
// Pages stay allocated until release().
#pragma once
#include <cstdint>
#include <vector>

#include "kiln/engine/kv_pool.h"
#include "kiln/engine/step_batch.h"

namespace kiln::engine {

struct SteppedSequence {
  std::vector<int32_t> pages;
  int32_t len = 0;
};

class SequenceStepper {
 public:
  SequenceStepper(ModelExecutor& exec, KvPool& pool) : exec_(exec), pool_(pool) {}

  // Appends `tokens` to each sequence in one step (every sequence may get a different number
  // of tokens: chunked prefill and decode mixed). Returns, per sequence, the last row's logits
  // (or, when greedy, a one-element vector with the argmax id as float). Throws kiln::Error
  // when the pool has no pages left.
  std::vector<std::vector<float>> step(const std::vector<SteppedSequence*>& seqs,
                                       const std::vector<std::vector<int32_t>>& tokens,
                                       bool greedy = false, bool* used_graph = nullptr);
  // Appends `tokens` to one sequence in one step and returns every row's logits, [n, vocab]
  // row-major (what scoring a text needs: perplexity, prompt logprobs).
  std::vector<float> step_all_rows(SteppedSequence& seq, const std::vector<int32_t>& tokens);
  // Appends `tokens` to one sequence in one step and returns the final-norm hidden states of
  // its last row ([1, dim]) or, with all_rows, of every row ([n, dim], row-major): a decoder's
  // embedding of the tokens (always eager).
  std::vector<float> step_hidden(SteppedSequence& seq, const std::vector<int32_t>& tokens,
                                 bool all_rows);
  // Greedy continuation of `n` tokens after the prompt already in seq (decode steps).
  std::vector<int32_t> greedy(SteppedSequence& seq, int32_t first_token, int n,
                              bool greedy_plans = true);
  void release(SteppedSequence& seq);

 private:
  // The step's rows (allocating pages as needed; each sequence wants its last row's logits).
  StepBatch batch_of(const std::vector<SteppedSequence*>& seqs,
                     const std::vector<std::vector<int32_t>>& tokens);

  ModelExecutor& exec_;
  KvPool& pool_;
};

// Index of the largest value (the lowest index on ties).
int32_t argmax_row(const std::vector<float>& row);

}  // namespace kiln::engine
