// Paged attention over the KV cache (f16, or q8 read and dequantized block by block: no f16
// copy of the cache): one kernel family for prefill, chunked prefill and decode, with GQA,
// sliding windows and inert (padded) rows.
//
// Query row t (of sequence s = token_seq[t], at position p = positions[t]) attends to the keys
// of s at positions in [lo, p], lo = 0 (full causal) or max(0, p - window + 1) (sliding
// window: only the window is ever read), through s's row of the block table. Scores are
// scale * q.k, optionally softcapped (cap * tanh(score / cap)) before the softmax. With
// attention sinks (gpt-oss), head h's softmax denominator also counts exp(sinks[h]): one more
// logit that takes no value, so a row may give less than all of its weight to its keys.
//
// Work split and batch invariance. Keys are cut into FIXED chunks of kAttnChunk positions
// (chunk c holds positions [c*kAttnChunk, (c+1)*kAttnChunk)), independent of the batch and of
// the thread count. For every (row, head) the kernel computes one partial (max, sum, acc) per
// chunk its range touches, always with the same arithmetic, and folds the partials in chunk
// order. How rows are tiled, how chunk ranges are split across threads (split-K) and which
// thread runs what never change that sequence of operations, so a row's output is
// bit-identical alone or in any batch, with 1 or N threads.
//
// Host side, every step (the graph runner's replay-time update hook): attention_plan() reads
// positions / seq_lens / token_seq, validates them, and writes the work list into a
// preallocated AttentionWork (no heap allocation): tiles of up to kAttnTileRows consecutive
// rows of one sequence (K/V are read once per tile and used by tile_rows * group queries:
// prefill reuses them across rows, decode across the heads of a GQA group; an item of at most
// 8 queries FMAs straight from the f16 pool, a larger one converts each 16-key block to f32
// once), times KV heads, with long chunk ranges split into segments when there would otherwise be
// too few items to keep the threads busy. attention_run() then executes on every thread of the
// group: items are claimed dynamically, then (after ctx.sync()) split rows are merged.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kiln/kernels/exec_context.h"
#include "kiln/kernels/kv_cache.h"

namespace kiln::kernels {

constexpr int kAttnChunk = 256;   // key positions per split-K chunk (fixed: see above)
constexpr int kAttnTileRows = 8;  // query rows of one sequence sharing one K/V pass
constexpr int kAttnMaxHeadDim = 512;

// Static shapes, fixed at plan-build time.
struct AttentionParams {
  int n_heads = 0;
  int n_kv_heads = 0;         // n_heads must be a multiple (GQA)
  int head_dim = 0;           // even, <= kAttnMaxHeadDim; the AVX paths need a multiple of 16
  int max_pages_per_seq = 0;  // row stride of the block table
  int window = 0;             // 0 = full causal, else sliding window of this many positions
  float scale = 1.0f;         // applied to q.k (usually 1/sqrt(head_dim))
  // > 0: every scaled score s becomes softcap * tanh(s / softcap) before the softmax (Gemma 2's
  // attention-logit softcapping); 0: scores are used as they are.
  float softcap = 0.0f;
};

// Capacities the scratch and the work list are sized for.
struct AttentionLimits {
  int64_t max_tokens = 0;  // rows T per call
  int max_threads = 1;     // largest worker group that runs attention_run
  // Split-K partial results (one per query row, head and chunk) kept between the phases.
  // Splitting is only for load balance, so when this runs out the plan splits less.
  int64_t max_split_partials = 8192;
};

// Per-step inputs. seq_lens[s] counts the keys of s present after this step's kv_write;
// every non-inert row needs positions[t] < seq_lens[token_seq[t]].
struct AttentionInputs {
  const float* q = nullptr;  // [T, n_heads * head_dim]
  int64_t T = 0;
  const int32_t* positions = nullptr;    // [T]
  const int32_t* token_seq = nullptr;    // [T]; -1 = inert row (output zeros)
  const int32_t* block_table = nullptr;  // [S, max_pages_per_seq]
  const int32_t* seq_lens = nullptr;     // [S]
  int64_t S = 0;
  KvLayerView kv;        // n_kv_heads and head_dim must match the params
  float* out = nullptr;  // [T, n_heads * head_dim]; must not alias q
  // [n_heads] per-head sink logits (unscaled, not softcapped), or null: no sinks.
  const float* sinks = nullptr;
};

// The work list attention_plan() fills. Allocated once (constructor), refilled every step.
class AttentionWork {
 public:
  AttentionWork(const AttentionParams& params, const AttentionLimits& limits);

  struct Tile {
    int32_t row0 = 0;
    int32_t rows = 0;
    int32_t seq = 0;
    int32_t chunk_begin = 0;
    int32_t chunk_end = 0;
    int32_t split_chunk = 0;   // chunks >= this are computed by other items (== end: no split)
    int64_t partial_base = 0;  // first partial of this tile (per KV head: + kvh * per_head)
  };
  struct Item {
    int32_t tile = 0;
    int32_t kv_head = 0;
    int32_t chunk_begin = 0;
    int32_t chunk_end = 0;
    int32_t q_begin = 0;  // the tile's queries (row-major over rows x GQA group) it computes
    int32_t q_end = -1;   // -1: to the last
    int64_t cost = 0;
  };

  const AttentionLimits& limits() const { return limits_; }
  int64_t n_items() const { return n_items_; }
  int64_t n_tiles() const { return n_tiles_; }
  int64_t n_split_tiles() const { return n_merges_; }

  // Filled by attention_plan, read by attention_run (public for the kernel's own files).
  AttentionLimits limits_;
  std::vector<int32_t> row_lo, row_hi;  // [max_tokens] key range [lo, hi) of each row
  std::vector<Tile> tiles;
  std::vector<Item> items;
  std::vector<int32_t> merges;  // tiles with split chunk ranges
  std::vector<int32_t> inert;   // rows to zero
  int64_t n_tiles_ = 0, n_items_ = 0, n_merges_ = 0, n_inert_ = 0;
  int64_t planned_T = -1;
  int planned_nth = 0;
  std::atomic<int64_t> next_item{0};
};

// Bytes of scratch attention_run needs (running softmax state, split-K partials, per-thread
// workspace). The caller allocates it once (64-byte aligned) and passes it to every run.
size_t attention_scratch_bytes(const AttentionParams& params, const AttentionLimits& limits);

// Host-side planning for `nth` threads; cheap, no heap allocation. Throws kiln::Error on bad
// inputs (unknown sequence, position beyond seq_len, page id outside the pool, ...), so
// attention_run never reads outside the pool.
void attention_plan(const AttentionParams& params, const AttentionInputs& inputs, int nth,
                    AttentionWork* work);

// Runs the planned work on every thread of ctx's group (ctx.nth must equal the plan's nth).
// Contains one ctx.sync() between the chunk phase and the merge phase.
void attention_run(const AttentionParams& params, const AttentionInputs& inputs,
                   AttentionWork& work, void* scratch, const ExecContext& ctx);

}  // namespace kiln::kernels
