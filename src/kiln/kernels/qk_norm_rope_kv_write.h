// The fused "qk-norm + rope + kv write" kernel of the graph pass of that name: per token row,
// per-head RMS norm of Q and K, RoPE on both, then K (normed, roped) and V (raw) stored into
// the paged cache (converted to f16, or quantized to q8 blocks, as kv_write does). One pass
// per row while it sits in L1, instead of three kernels and two intermediate tensors.
//
// Bit-identical to the unfused composition on the same ISA: rms_norm on [T*H, hd] and
// [T*KH, hd] rows, rope, then kv_write. It calls the very same per-row routines (through the
// ISA tables), so this holds by construction, and the tests check it.
#pragma once
#include <cstdint>

#include "kiln/kernels/exec_context.h"
#include "kiln/kernels/kv_cache.h"
#include "kiln/kernels/rope.h"

namespace kiln::kernels {

// q: [T, n_heads*hd]; k, v: [T, kv_heads*hd] (kv_heads and hd from `view`). q_norm_w and
// k_norm_w: [hd] per-head norm weights, or both null for models without QK norm (then this
// is the fused rope + kv write). `rope` as for kernels::rope (its head_dim must be view's):
// partial rotary and frequency factors work the same way here. q_out may alias q.
// slots[t] < 0: inert row, nothing written to the cache (q_out is still computed). Threads
// split the rows.
void qk_norm_rope_kv_write(const float* q, const float* k, const float* v, const float* q_norm_w,
                           const float* k_norm_w, float eps, const int32_t* positions,
                           const RopeSpec& rope, const int32_t* slots, int64_t T, int n_heads,
                           float* q_out, const KvLayerView& view, const ExecContext& ctx);

// Full rotary without frequency factors.
inline void qk_norm_rope_kv_write(const float* q, const float* k, const float* v,
                                  const float* q_norm_w, const float* k_norm_w, float eps,
                                  const int32_t* positions, const float* inv_freq, bool neox,
                                  const int32_t* slots, int64_t T, int n_heads, float* q_out,
                                  const KvLayerView& view, const ExecContext& ctx) {
  qk_norm_rope_kv_write(q, k, v, q_norm_w, k_norm_w, eps, positions,
                        RopeSpec{view.head_dim, view.head_dim, neox, inv_freq, nullptr}, slots, T,
                        n_heads, q_out, view, ctx);
}

}  // namespace kiln::kernels
