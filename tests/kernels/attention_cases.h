// Attention test batches shared by the f16 and q8 attention tests: sequences with cached keys and
// fresh query rows, laid out over pages handed out in a scrambled order (so the block table is
// really followed), run through the kernel's plan/run phases, and a float64 reference that reads
// keys and values through the caller's accessor (f16 pool or dequantized q8 values).
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "kiln/kernels/attention.h"

namespace kiln::kernels::testing {

struct SeqSpec {
  int before;  // keys already cached
  int fresh;   // query rows this step (their keys are in the cache too, as after kv_write)
};

struct AttentionCase {
  int H = 4, KH = 1, hd = 256, page_size = 16, window = 0;
  float softcap = 0.0f;
  float q_range = 4.0f;  // q drawn from [-q_range, q_range]
  // > 0: per-head attention sinks drawn from [-sink_range, sink_range] (gpt-oss); 0: none.
  float sink_range = 0.0f;
  std::vector<SeqSpec> seqs;
  std::vector<int> inert_at;  // batch positions of inert (padding) rows
};

// A batch without its KV values: parameters, pages, rows and queries.
struct AttentionBatch {
  AttentionParams p;
  int64_t n_pages = 0;  // pages the pool must have
  std::vector<int32_t> block_table, seq_lens, positions, token_seq;
  std::vector<float> q;
  std::vector<float> sinks;  // [n_heads], or empty: no sinks
  int64_t T = 0, S = 0;

  AttentionInputs inputs(float* out, const KvLayerView& view) const;
  // Row t as a batch of its own: one row of one sequence, over the same pages.
  AttentionBatch row_alone(int64_t t) const;
  std::vector<float> row_of(const std::vector<float>& out, int64_t t) const;
};

// Pages and rows for case c; q from seed + 2 (seed and seed + 1 are left for K and V).
AttentionBatch layout_attention_batch(const AttentionCase& c, uint32_t seed);

// attention_plan + attention_run on nth threads with max_split split-K partials.
std::vector<float> run_attention(const AttentionBatch& b, const KvLayerView& view, int nth,
                                 int64_t max_split = 8192);

// Dense float64 attention over the keys each row may see; key(off) / value(off) read element
// off of the pool's [slot][kv_head][head_dim] layout. Inert rows stay zero.
using KvElement = std::function<float(int64_t off)>;
std::vector<float> reference_attention(const AttentionBatch& b, int page_size, const KvElement& key,
                                       const KvElement& value);

}  // namespace kiln::kernels::testing
