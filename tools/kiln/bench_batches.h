// The step batches `kiln bench` feeds the model runner directly (no scheduler in between, like
// SGLang's bench_one_batch): `bs` sequences of random prompt ids with KV pages reserved for the
// whole run, prefill batches of whole or split prompts (chunked like the engine's scheduler),
// and decode batches of one row per sequence.
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
  // The prompts in prefill batches of at most `chunk_tokens` rows, in order (whole batch in one
  // step when chunk_tokens >= bs * input_len). Each chunk asks for the greedy id of every
  // sequence it touches; `completes[i]` lists the sequences whose prompt chunk i finishes.
  struct Chunk {
    engine::StepBatch batch;
    std::vector<int> seqs;       // batch sequence index -> sequence
    std::vector<bool> finishes;  // per batch sequence: its last prompt token is in this chunk
  };
  std::vector<Chunk> prefill(int64_t chunk_tokens) const;
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
