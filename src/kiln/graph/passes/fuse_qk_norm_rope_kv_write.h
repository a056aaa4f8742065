// fuse_qk_norm_rope_kv_write: the per-head RMS norm and RoPE of q and k and the KV write of
// that k and v (Gemma 3, Qwen 3) become one op that reads q, k, v once:
//   q: %q3 = reshape(%q) [T,H,hd] ; %qn = rms_norm(%q3, %qw) ; %q2 = reshape(%qn) [T,H*hd] ; %qr =
//   rope(%q2, %pos) k: the same with %kw, giving %kr %t = kv_write(%kv, %kr, %v, %slots) {layer} %a
//   = attention(%qr, %t, ...) {layer}        (the attention that ties this q to this write)
// =>
//   %qr, %t = qk_norm_rope_kv_write(%q, %k, %v, %qw, %kw, %pos, %kv, %slots [, %ff])
//             {eps, head_dim, freq_base, neox, layer, n_heads, n_kv_heads [, n_rot]}
// where the ropes' frequency factors %ff (rope's optional third input) and n_rot (partial
// rotary) carry over when the ropes have them.
// Every reader of %t (the attention) then reads the fused node's token output. The per-head
// view may also be [T*H, hd] (rows of single heads, as model/transformer.cc writes it), and
// the reshapes may be absent (one head: the view is the source's own shape, and noop_elim
// removed the identity reshapes).
// Refuses: any intermediate of the q or k chain with another use (k's roped value too; q's
// roped value may have several readers), norms or ropes that disagree (eps, head_dim,
// freq_base, neox, n_rot, positions, freq_factors: the same value or absent from both), a norm
// weight that is not [head_dim], and a rewrite that would break the effect order (a reader of the
// state before this write that needs the fused q). Does NOT: fuse q/k without the per-head norm
// (Llama), or a v that is normed or roped.
#pragma once
#include "kiln/graph/passes/pass.h"

namespace kiln::graph {

PassResult run_fuse_qk_norm_rope_kv_write(Graph& graph, const PassOptions& options);

}  // namespace kiln::graph
