// Drives a ModelExecutor directly (no scheduler) for model-level tests: sequences with their
// own KV pages, prefill of many tokens in one step, decode steps over several sequences.
// Pages stay allocated until release(); tests use a pool per runtime, so leftovers vanish with it.
#pragma once
#include <cstdint>
#include <vector>

#include "kiln/engine/kv_pool.h"
#include "kiln/engine/step_batch.h"

namespace kiln::testing {

struct Sequence {
  std::vector<int32_t> pages;
  int32_t len = 0;
};

class ModelHarness {
 public:
  ModelHarness(engine::ModelExecutor& exec, engine::KvPool& pool) : exec_(exec), pool_(pool) {}

  // Appends `tokens` to each sequence in one step (every sequence may get a different number
  // of tokens: chunked prefill and decode mixed). Returns, per sequence, the last row's logits
  // (or, when greedy, a one-element vector with the argmax id as float).
  std::vector<std::vector<float>> step(std::vector<Sequence*> seqs,
                                       const std::vector<std::vector<int32_t>>& tokens,
                                       bool greedy = false, bool* used_graph = nullptr);
  // Greedy continuation of `n` tokens after the prompt already in seq (decode steps).
  std::vector<int32_t> greedy(Sequence& seq, int32_t first_token, int n, bool greedy_plans = true);
  void release(Sequence& seq);

 private:
  engine::ModelExecutor& exec_;
  engine::KvPool& pool_;
};

int32_t argmax(const std::vector<float>& row);

}  // namespace kiln::testing
