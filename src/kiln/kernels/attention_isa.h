// Internal: what one ISA's attention code needs from the plan, and its entry points.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kiln/kernels/attention.h"

namespace kiln::kernels::detail {

constexpr int kAttnKeyBlock = 16;  // keys converted from f16 at a time

// Floats of one stored partial: acc[head_dim], then max and sum (padded to 64 bytes).
inline int64_t attn_partial_stride(int head_dim) { return (head_dim + 2 + 15) / 16 * 16; }
inline int attn_group(const AttentionParams& p) { return p.n_heads / p.n_kv_heads; }
inline int64_t attn_max_queries(const AttentionParams& p) {
  return static_cast<int64_t>(kAttnTileRows) * attn_group(p);
}
// Per-thread workspace: scores [nq][chunk], acc [nq][hd], f32 K/V block, max/sum [nq].
inline int64_t attn_ws_floats(const AttentionParams& p) {
  int64_t nq = attn_max_queries(p);
  int64_t n = nq * kAttnChunk + nq * p.head_dim + kAttnKeyBlock * p.head_dim + 2 * nq;
  return (n + 15) / 16 * 16;
}

struct AttnArgs {
  const AttentionParams* p;
  const AttentionInputs* in;
  const AttentionWork* w;
  float* run_ml;    // [max_tokens][n_heads][2]: running (max, sum) of each row and head
  float* partials;  // [max_split_partials][attn_partial_stride]
};

struct AttentionFns {
  // Computes one item; ws is this thread's workspace (attn_ws_floats). `following` (may be
  // null) is the item this thread runs next, whose first K block the last V block asks for.
  void (*run_item)(const AttnArgs& a, const AttentionWork::Item& item,
                   const AttentionWork::Item* following, float* ws);
  // Folds the stored partials of a split tile (every KV head) and writes its output.
  void (*merge_tile)(const AttnArgs& a, int32_t tile);
};

extern const AttentionFns kAttentionScalar;
extern const AttentionFns kAttentionAvx2;
extern const AttentionFns kAttentionAvx512;

}  // namespace kiln::kernels::detail
