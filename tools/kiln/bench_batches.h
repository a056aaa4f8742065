// The step batches `kiln bench` feeds the model runner directly (no scheduler in between, like
// SGLang's bench_one_batch): `bs` sequences of random prompt ids with KV pages reserved for the
// whole run, one prefill batch holding every prompt, and decode batches one row per sequence.
#pragma once
#include <cstdint>
#include <vector>

#include "kiln/engine/kv_pool.h"
#include "kiln/engine/step_batch.h"

namespace kiln::cli {

class BenchSequences {
 public:
  // Reserves pages for input_len + output_len tokens per sequence (Error when the pool is too
  // small); prompts are random ids in [vocab/2-ish, vocab), away from control tokens.
  BenchSequences(engine::KvPool& pool, int bs, int input_len, int output_len, int64_t vocab,
                 uint64_t seed);
  ~BenchSequences();
  BenchSequences(const BenchSequences&) = delete;
  BenchSequences& operator=(const BenchSequences&) = delete;

  int size() const { return static_cast<int>(prompts_.size()); }
  // Every prompt in one batch; greedy ids of each sequence's last row come back.
  engine::StepBatch prefill() const;
  // One row per sequence at position `pos` (0-based; the prompt occupies [0, input_len)).
  engine::StepBatch decode(int pos, const std::vector<int32_t>& tokens,
                           bool greedy_only = true) const;

 private:
  int32_t slot(int seq, int pos) const;

  engine::KvPool& pool_;
  std::vector<std::vector<int32_t>> prompts_;
  std::vector<std::vector<int32_t>> pages_;
};

}  // namespace kiln::cli
