// The one table of graph ops. Every other place (printer, parser, verifier, passes, lowering)
// reads it instead of listing ops again.
//
// Columns: enum name, text name, input arity (-1: variadic), output count, group, in-place
// capable (its output may reuse the buffer of input 0 when that input dies here). An op may
// also take optional inputs after its `arity` required ones (optional_inputs() below); an
// absent optional input is simply not in the input list, so the present ones keep their
// positions.
#pragma once
#include <optional>
#include <string_view>

namespace kiln::graph {

enum class OpGroup {
  Source,
  Elementwise,
  Norm,
  Gemm,
  Attention,
  Mutation,
  Reduction,
  Shape,
  Collective,
  Fused
};

// clang-format off
#define KILN_OPS(X)                                                                     \
  /* sources: attrs {name}; `param` may carry {concat=[...]} for a weight derived at load */ \
  X(Input,            "input",            0, 1, Source,      false)                     \
  X(Param,            "param",            0, 1, Source,      false)                     \
  X(State,            "state",            0, 1, Source,      false)                     \
  /* gather rows of a (possibly quantized) table: (table[V,D], ids i32[T]) -> f32[T,D] */  \
  X(Embedding,        "embedding",        2, 1, Gemm,        false)                     \
  /* (x f32[T,K], w[N,K]) -> f32[T,N]: y = x w^T, any weight dtype */                    \
  X(Matmul,           "matmul",           2, 1, Gemm,        false)                     \
  /* (h f32[T,D], router w[E,D], gate_exps [E,F,D], up_exps [E,F,D], down_exps [E,D,F] \
      [, score_bias f32[E]]) {n_experts, top_k, norm_topk_prob [, sigmoid, n_groups,    \
      topk_groups, routed_scale]} -> f32[T,D]: mixture-of-experts FFN; each row's       \
      experts are chosen at run time, inside the kernel (kernels/moe_ffn.h). With       \
      {expert_biases=1} (gpt-oss) the optional inputs are instead router_bias f32[E],    \
      gate_bias f32[E,F], up_bias f32[E,F], down_bias f32[E,D]; optional softmax_topk,  \
      swiglu_alpha, swiglu_limit select gpt-oss's routing and clamped SwiGLU */         \
  X(MoeFfn,           "moe_ffn",          5, 1, Gemm,        false)                     \
  X(Add,              "add",              2, 1, Elementwise, true)                      \
  X(Mul,              "mul",              2, 1, Elementwise, true)                      \
  /* x * factor */                                                                      \
  X(Scale,            "scale",            1, 1, Elementwise, true)                      \
  X(Gelu,             "gelu",             1, 1, Elementwise, true)                      \
  /* 0.5x(1 + erf(x / sqrt(2))): the exact GELU (Falcon's); gelu is the tanh form */     \
  X(GeluErf,          "gelu_erf",         1, 1, Elementwise, true)                      \
  X(Silu,             "silu",             1, 1, Elementwise, true)                      \
  /* cap * tanh(x / cap) */                                                             \
  X(Softcap,          "softcap",          1, 1, Elementwise, true)                      \
  /* (x[...,D], w f32[D]) {eps} -> rms-normalized x * w over the last dimension */       \
  X(RmsNorm,          "rms_norm",         2, 1, Norm,        true)                      \
  /* (x[...,D], w f32[D] [, b f32[D]]) {eps} -> (x - mean) / sqrt(var + eps) * w (+ b)  \
      over the last dimension (LayerNorm; var the biased variance); b absent: none */   \
  X(LayerNorm,        "layer_norm",       2, 1, Norm,        true)                      \
  /* (x f32[T,H*hd], positions i32[T] [, freq_factors f32[n_rot/2]])                    \
      {head_dim, freq_base, neox [, n_rot]}: the first n_rot dims of each head          \
      rotate, pairs (i, i+n_rot/2) when neox, else (2i, 2i+1), frequency i being        \
      freq_base^(-2i/n_rot) / freq_factors[i]; the other dims pass through.             \
      n_rot absent: head_dim. freq_factors (a param: Llama 3's rope_freqs.weight)       \
      absent: all 1 */                                                                  \
  X(Rope,             "rope",             2, 1, Elementwise, true)                      \
  /* same bytes, new shape {shape=[...]}; in place = a view, no bytes move */            \
  X(Reshape,          "reshape",          1, 1, Shape,       true)                      \
  X(Copy,             "copy",             1, 1, Shape,       false)                     \
  /* {dtype=...} */                                                                     \
  X(Cast,             "cast",             1, 1, Shape,       false)                     \
  /* (x[T,D], rows i32[R]) -> x[R,D] */                                                 \
  X(TakeRows,         "take_rows",        2, 1, Shape,       false)                     \
  /* (kv state|token, k f32[T,KH*hd], v f32[T,KH*hd], slots i32[T]) {layer} -> token */    \
  X(KvWrite,          "kv_write",         4, 1, Mutation,    false)                     \
  /* (q f32[T,H*hd], kv token, block_table i32[S,P], seq_lens i32[S], positions i32[T],  \
      token_seq i32[T] [, sinks f32[H]]) {layer, n_heads, n_kv_heads, head_dim, window, \
      scale, optional softcap > 0} -> f32[T,H*hd]; token t attends to its sequence's    \
      keys at positions <= its own, and > position - window when window > 0; with       \
      softcap, scores scale*q.k become softcap * tanh(score / softcap) before the       \
      softmax; with sinks, head h's softmax denominator also counts exp(sinks[h]) */    \
  X(Attention,        "attention",        6, 1, Attention,   false)                     \
  /* x[T,V] -> i32[T] */                                                                \
  X(Argmax,           "argmax",           1, 1, Reduction,   false)                     \
  /* ---- collectives of tensor parallelism (docs/tensor-parallel.md): every rank runs   \
      them in node order, one at a time (schedule.h chains them); passes never merge,   \
      move or fuse across them ---- */                                                  \
  /* x f32[...] -> the sum over ranks of x, added in rank order (same bits everywhere) */ \
  X(AllReduce,        "all_reduce",       1, 1, Collective,  false)                     \
  /* rank's logits slice f32[R, Vr] {vocab} -> f32[R, vocab]: the slices of all ranks,  \
      rank r holding ids split_range(vocab, r, ranks) */                                \
  X(AllGatherVocab,   "all_gather_vocab", 1, 1, Collective,  false)                     \
  /* rank's logits slice f32[R, Vr] {vocab} -> i32[R]: argmax over the whole vocabulary \
      (ties: lowest id; NaN never wins), as argmax of the gathered logits */           \
  X(AllArgmax,        "all_argmax",       1, 1, Collective,  false)                     \
  /* ---- fused ops (produced by passes/fuse_*, never by model code) ---- */             \
  /* (a, b, w) {eps} -> (a+b, rms_norm(a+b, w)) */                                      \
  X(AddRmsNorm,       "add_rms_norm",     3, 2, Fused,       false)                     \
  /* (gate, up) -> gelu(gate) * up */                                                   \
  X(GeluMul,          "gelu_mul",         2, 1, Fused,       true)                      \
  X(SiluMul,          "silu_mul",         2, 1, Fused,       true)                      \
  /* (x, w_merged) {splits=[n0,n1,...]} -> one output per split of the output columns */  \
  X(MatmulSplit,      "matmul_split",     2, -1, Fused,      false)                     \
  /* (x, w, residual) -> x w^T + residual */                                            \
  X(MatmulAdd,        "matmul_add",       3, 1, Fused,       false)                     \
  /* (q, k, v, q_norm_w, k_norm_w, positions, kv, slots [, freq_factors])               \
      {eps, head_dim, freq_base, neox, layer, n_heads, n_kv_heads [, n_rot]}            \
      -> (q normed+roped, token after writing k,v); the rope part exactly as            \
      rope's inputs and attributes of the same names */                                 \
  X(QkNormRopeKvWrite,"qk_norm_rope_kv_write", 8, 2, Fused, false)                      \
  /* (x, norm_w, w) {eps} -> i32[T]: argmax(rms_norm(x) w^T), logits never written */    \
  X(NormMatmulArgmax, "norm_matmul_argmax", 3, 1, Fused,     false)
// clang-format on

enum class Op {
#define KILN_OP_ENUM(name, text, arity, outs, group, inplace) name,
  KILN_OPS(KILN_OP_ENUM)
#undef KILN_OP_ENUM
};

struct OpInfo {
  std::string_view name;
  int arity;    // -1: variadic
  int outputs;  // -1: decided by attributes (matmul_split: one per split)
  OpGroup group;
  bool inplace_capable;
};

const OpInfo& op_info(Op op);
inline std::string_view op_name(Op op) { return op_info(op).name; }
std::optional<Op> op_from_name(std::string_view name);
// Ops with side effects on state: never removed, merged or reordered across each other.
inline bool has_side_effect(Op op) {
  return op_info(op).group == OpGroup::Mutation || op == Op::QkNormRopeKvWrite;
}
// Collectives run on every rank in the same order and are never merged or fused.
inline bool is_collective(Op op) { return op_info(op).group == OpGroup::Collective; }
// How many optional inputs may follow the op's `arity` required ones: 1 for rope and
// qk_norm_rope_kv_write (freq_factors) and layer_norm (its bias), else 0.
int optional_inputs(Op op);
// Index of the input that carries the state or an effect token (the kv input of kv_write,
// attention and qk_norm_rope_kv_write); -1 for ops that touch no state.
int effect_input(Op op);

}  // namespace kiln::graph
