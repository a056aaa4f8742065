// What model code calls to record its forward pass (the "trace"). Each method appends a node,
// infers its output type, and returns the value. Model code exists once, written against this:
// eager mode interprets the recorded graph, graph mode compiles it.
#pragma once
#include <array>
#include <optional>
#include <string>

#include "kiln/graph/ir.h"

namespace kiln::graph {

struct AttentionSpec {
  int layer = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int window = 0;  // 0: full causal attention
  float scale = 1.0f;
  // > 0: scaled scores become softcap * tanh(score / softcap) before the softmax (Gemma 2's
  // attn_logit_softcapping); 0: none, and the node carries no softcap attribute.
  float softcap = 0.0f;
  // gpt-oss's per-head sink logits, f32[n_heads] (the node's optional input 6); none: absent.
  std::optional<Value> sinks = std::nullopt;
};

class Builder {
 public:
  explicit Builder(std::string graph_name) : graph_(std::move(graph_name)) {}

  void bind_dim(std::string name, int64_t value) {
    graph_.dims().emplace_back(std::move(name), value);
  }

  Value input(const std::string& name, DType dtype, const Shape& shape);
  Value param(const std::string& name, DType dtype, const Shape& shape);
  Value state(const std::string& name, DType dtype, const Shape& shape);

  Value embedding(Value table, Value ids);
  Value matmul(Value x, Value w);
  // Mixture-of-experts FFN (op moe_ffn): h f32[T,D] after the FFN norm, router [E,D],
  // gate_exps and up_exps [E,F,D], down_exps [E,D,F]; n_experts is E, from the router.
  // route: DeepSeek's routing options (kernels/moe_ffn.h); the defaults add no attribute.
  struct MoeRoute {
    bool sigmoid = false;
    int n_groups = 1;
    int topk_groups = 1;
    double routed_scale = 1.0;
    std::optional<Value> score_bias = std::nullopt;  // f32[E]
    // gpt-oss: top-k by logit, softmax over those k (no renormalization), the clamped SwiGLU
    // (swiglu_limit > 0) and biases on the router and the experts: router f32[E], gate and up
    // f32[E,F], down f32[E,D] (all four or none; not with score_bias).
    bool softmax_topk = false;
    double swiglu_alpha = 0.0;
    double swiglu_limit = 0.0;
    std::optional<std::array<Value, 4>> expert_biases = std::nullopt;
  };
  Value moe_ffn(Value h, Value router, Value gate_exps, Value up_exps, Value down_exps, int top_k,
                bool norm_topk_prob, const MoeRoute& route);
  Value moe_ffn(Value h, Value router, Value gate_exps, Value up_exps, Value down_exps, int top_k,
                bool norm_topk_prob) {
    return moe_ffn(h, router, gate_exps, up_exps, down_exps, top_k, norm_topk_prob, MoeRoute{});
  }
  Value add(Value a, Value b);
  Value mul(Value a, Value b);
  Value scale(Value x, double factor);
  Value gelu(Value x);  // the tanh form
  Value gelu_erf(Value x);
  Value silu(Value x);
  Value softcap(Value x, double cap);
  Value rms_norm(Value x, Value w, double eps);
  // LayerNorm over the last dimension; bias f32[D] when the model has one.
  Value layer_norm(Value x, Value w, std::optional<Value> bias, double eps);
  // RoPE on x f32[T, heads*head_dim] at positions i32[T]. freq_factors: an f32[n_rot/2] value
  // (the param of the GGUF's rope_freqs.weight) dividing frequency i; n_rot: the rotated
  // leading dimensions of each head (<arch>.rope.dimension_count), 0 or head_dim: all of
  // them. The node gets the third input only when freq_factors is given and the n_rot
  // attribute only when n_rot is neither 0 nor head_dim, so a full-rotary rope without factors
  // is the same node (same text IR, same compile-cache key) as before either existed.
  Value rope(Value x, Value positions, int head_dim, double freq_base, bool neox,
             std::optional<Value> freq_factors = std::nullopt, int n_rot = 0);
  Value reshape(Value x, const Shape& shape);
  Value take_rows(Value x, Value rows);
  Value kv_write(Value kv, Value k, Value v, Value slots, int layer);
  Value attention(Value q, Value kv_token, Value block_table, Value seq_lens, Value positions,
                  Value token_seq, const AttentionSpec& spec);
  Value argmax(Value x);
  // Tensor parallelism (ops all_reduce, all_gather_vocab, all_argmax; op_table.h).
  Value all_reduce(Value x);
  Value all_gather_vocab(Value logits_slice, int64_t vocab);
  Value all_argmax(Value logits_slice, int64_t vocab);

  // Gives `v` a name for the text form (%name); sources are named after their tensor name.
  Value named(Value v, std::string name);

  void output(Value v) { graph_.outputs().push_back(v); }
  const ValueType& type(Value v) const { return graph_.type(v); }
  // Verifies and hands over the graph (which must have at least one output).
  Graph finish();

 private:
  Value emit(Op op, std::vector<Value> inputs, Attrs attrs = {});
  Value source(Op op, const std::string& name, DType dtype, const Shape& shape);
  Graph graph_;
};

}  // namespace kiln::graph
