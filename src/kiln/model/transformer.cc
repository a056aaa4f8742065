#include "kiln/model/transformer.h"

#include <cmath>
#include <optional>

#include "kiln/base/error.h"
#include "kiln/graph/builder.h"
#include "kiln/model/mla_tensors.h"

namespace kiln::model {
namespace {

using graph::Builder;
using graph::Value;

class ForwardBuilder {
 public:
  ForwardBuilder(const ModelConfig& c, const WeightLookup& w, const ForwardShape& s,
                 const std::string& name)
      : c_(c), weights_(w), s_(s), b_(name) {}

  graph::Graph build() {
    const int64_t T = s_.tokens;
    const int64_t S = s_.seqs;
    b_.bind_dim("T", T);
    b_.bind_dim("S", S);
    ids_ = b_.input(input_names::kTokenIds, DType::I32, {T});
    positions_ = b_.input(input_names::kPositions, DType::I32, {T});
    token_seq_ = b_.input(input_names::kTokenSeq, DType::I32, {T});
    slots_ = b_.input(input_names::kSlots, DType::I32, {T});
    block_table_ = b_.input(input_names::kBlockTable, DType::I32, {S, s_.max_pages_per_seq});
    seq_lens_ = b_.input(input_names::kSeqLens, DType::I32, {S});
    const graph::ValueType kv_type = kv_state_type(c_, s_);
    Value kv = b_.state(input_names::kKvPool, kv_type.dtype, kv_type.shape);

    // One param shared by every layer's q and k ropes (the QK-norm/RoPE fusion pairs q and k
    // only when their factors are the same value).
    if (c_.rope_freq_factors) rope_factors_ = weight(kRopeFreqsTensor);
    Value x = b_.embedding(weight("token_embd.weight"), ids_);
    if (c_.scale_embeddings) x = b_.scale(x, std::sqrt(static_cast<double>(c_.n_embd)));
    if (c_.embedding_scale != 1.0) x = b_.scale(x, c_.embedding_scale);

    for (int il = 0; il < c_.n_layers; ++il) x = layer(il, x, kv);

    std::optional<Value> hidden;
    if (s_.hidden_rows > 0) {
      KILN_CHECK(c_.tp_size == 1, "hidden-state outputs are not supported with tensor parallel");
      Value rows = b_.input(input_names::kHiddenRows, DType::I32, {s_.hidden_rows});
      hidden = norm(b_.take_rows(x, rows), "output_norm");
    }
    if (!s_.logits) {
      KILN_CHECK(hidden.has_value(), "a forward step with neither logits nor hidden states");
      b_.output(*hidden);
      return b_.finish();
    }
    if (s_.logit_rows >= 0) {
      Value rows = b_.input(input_names::kLogitRows, DType::I32, {s_.logit_rows});
      x = b_.take_rows(x, rows);
    }
    x = norm(x, "output_norm");
    if (c_.tp_size > 1) {
      // This rank's vocabulary rows: greedy ids come from a distributed argmax, logits are
      // gathered from every rank's slice.
      Value logits = b_.matmul(x, weight(kTpLmHeadTensor));
      logits = scale_logits(logits);
      b_.output(s_.greedy ? b_.all_argmax(logits, c_.vocab)
                          : b_.all_gather_vocab(logits, c_.vocab));
      return b_.finish();
    }
    Value head = weight(c_.tied_output ? "token_embd.weight" : "output.weight");
    Value logits = b_.matmul(x, head);
    logits = scale_logits(logits);
    b_.output(s_.greedy ? b_.argmax(logits) : logits);
    if (hidden) b_.output(*hidden);
    return b_.finish();
  }

 private:
  Value weight(const std::string& name) {
    auto meta = weights_(name);
    KILN_CHECK(meta.has_value(), "model file has no tensor '{}' needed by {}", name, c_.arch);
    return b_.param(name, meta->dtype, meta->shape);
  }
  bool has_weight(const std::string& name) { return weights_(name).has_value(); }

  // Granite divides the logits, Command-R multiplies them; a positive factor leaves greedy's
  // argmax as it is, so greedy steps skip it. Then Gemma's final softcap.
  Value scale_logits(Value logits) {
    if (c_.logit_scale != 1.0 && !s_.greedy) logits = b_.scale(logits, 1.0 / c_.logit_scale);
    if (c_.logit_multiplier != 1.0 && !s_.greedy) logits = b_.scale(logits, c_.logit_multiplier);
    if (c_.final_logit_softcap > 0) logits = b_.softcap(logits, c_.final_logit_softcap);
    return logits;
  }

  // y = x w^T (+ bias when the file has one).
  Value linear(Value x, const std::string& prefix) {
    Value y = b_.matmul(x, weight(prefix + ".weight"));
    if (has_weight(prefix + ".bias")) y = b_.add(y, weight(prefix + ".bias"));
    return y;
  }

  // The block's and the final norm: RMSNorm, or LayerNorm with the file's bias when it has one.
  Value norm(Value x, const std::string& prefix) {
    if (!c_.layer_norm) return b_.rms_norm(x, weight(prefix + ".weight"), c_.rms_eps);
    std::optional<Value> bias;
    if (has_weight(prefix + ".bias")) bias = weight(prefix + ".bias");
    return b_.layer_norm(x, weight(prefix + ".weight"), bias, c_.rms_eps);
  }

  // Per-head RMSNorm: view [T, H*hd] as [T*H, hd] rows.
  Value head_norm(Value x, int n_heads, const std::string& w) {
    const int64_t T = s_.tokens;
    Value rows = b_.reshape(x, {T * n_heads, c_.head_dim});
    Value normed = b_.rms_norm(rows, weight(w), c_.rms_eps);
    return b_.reshape(normed, {T, static_cast<int64_t>(n_heads) * c_.head_dim});
  }

  // RoPE over the first n_rot dimensions of each head, with Llama 3's per-dimension frequency
  // factors when the file has them (one tensor shared by every layer).
  Value rope(Value x, const LayerConfig& lc) {
    return b_.rope(x, positions_, c_.head_dim, lc.rope_base, c_.rope_neox, rope_factors_, c_.n_rot);
  }

  // suffix: "" for a dense layer, "_shexp" for DeepSeek's shared experts.
  Value dense_ffn(Value h, const std::string& blk, const std::string& suffix = "") {
    if (!c_.gated_ffn) {  // StarCoder 2, Falcon: up, activation, down (with their biases)
      Value up = linear(h, blk + ".ffn_up" + suffix);
      Value act = c_.activation == Activation::GeluErf ? b_.gelu_erf(up) : b_.gelu(up);
      return linear(act, blk + ".ffn_down" + suffix);
    }
    Value gate = b_.matmul(h, weight(blk + ".ffn_gate" + suffix + ".weight"));
    Value up = b_.matmul(h, weight(blk + ".ffn_up" + suffix + ".weight"));
    Value act = c_.activation == Activation::GeluTanh ? b_.gelu(gate) : b_.silu(gate);
    return b_.matmul(b_.mul(act, up), weight(blk + ".ffn_down" + suffix + ".weight"));
  }

  // Qwen3-MoE and Mixtral: router softmax over the experts, the top n_experts_used (renormalized
  // when the model says so), each token's chosen experts' SwiGLU outputs summed with those
  // weights. One fixed-shape op: the routing is data dependent, so it happens inside the op at
  // run time (graph mode captures it like any other node).
  // DeepSeek adds its routing options (kernels/moe_ffn.h) and its shared experts.
  Value moe_ffn(Value h, const std::string& blk) {
    graph::Builder::MoeRoute route;
    route.sigmoid = c_.expert_sigmoid;
    route.n_groups = c_.expert_groups;
    route.topk_groups = c_.expert_groups_used;
    route.routed_scale = c_.expert_weights_scale;
    const std::string bias = blk + ".exp_probs_b.bias";
    if (has_weight(bias)) route.score_bias = weight(bias);
    // gpt-oss: its routing, its clamped SwiGLU, biases on the router and every expert.
    route.softmax_topk = c_.moe_softmax_topk;
    route.swiglu_alpha = c_.swiglu_alpha;
    route.swiglu_limit = c_.swiglu_limit;
    if (has_weight(blk + ".ffn_gate_exps.bias")) {
      route.expert_biases = {weight(blk + ".ffn_gate_inp.bias"),
                             weight(blk + ".ffn_gate_exps.bias"), weight(blk + ".ffn_up_exps.bias"),
                             weight(blk + ".ffn_down_exps.bias")};
    }
    Value routed =
        b_.moe_ffn(h, weight(blk + ".ffn_gate_inp.weight"), weight(blk + ".ffn_gate_exps.weight"),
                   weight(blk + ".ffn_up_exps.weight"), weight(blk + ".ffn_down_exps.weight"),
                   c_.n_experts_used, c_.expert_weights_norm, route);
    if (c_.n_ff_shared == 0) return routed;
    return b_.add(routed, dense_ffn(h, blk, "_shexp"));
  }

  // DeepSeek's multi-head latent attention, decompressed (mla_tensors.h): Q (through the
  // q_lora bottleneck and its norm when the model has one), the normed latent, K as the
  // rotated shared key plus the latent's key decompression, V the latent's value one; each
  // head's rotary dimensions first.
  Value mla_attention(int il, Value h, Value& kv, const LayerConfig& lc, const std::string& blk) {
    Value q_in = h;
    if (c_.q_lora_rank > 0) {
      q_in = b_.rms_norm(b_.matmul(h, weight(blk + ".attn_q_a.weight")),
                         weight(blk + ".attn_q_a_norm.weight"), c_.rms_eps);
    }
    Value q = rope(b_.matmul(q_in, weight(mla_weight_name(il, "attn_q_mla"))), lc);
    Value latent = b_.rms_norm(b_.matmul(h, weight(mla_weight_name(il, "attn_kv_c"))),
                               weight(blk + ".attn_kv_a_norm.weight"), c_.rms_eps);
    Value k = b_.add(rope(b_.matmul(h, weight(mla_weight_name(il, "attn_k_pe_mla"))), lc),
                     b_.matmul(latent, weight(mla_weight_name(il, "attn_k_nope_mla"))));
    Value v = b_.matmul(latent, weight(mla_weight_name(il, "attn_v_mla")));
    kv = b_.kv_write(kv, k, v, slots_, il);
    Value attn = b_.attention(q, kv, block_table_, seq_lens_, positions_, token_seq_,
                              attention_spec(il, lc));
    return b_.matmul(attn, weight(mla_weight_name(il, "attn_output_mla")));
  }

  graph::AttentionSpec attention_spec(int il, const LayerConfig& lc) const {
    graph::AttentionSpec spec;
    spec.layer = il;
    spec.n_heads = c_.n_heads;
    spec.n_kv_heads = c_.n_kv_heads;
    spec.head_dim = c_.head_dim;
    spec.window = lc.window;
    spec.scale = static_cast<float>(c_.attention_scale);
    spec.softcap = static_cast<float>(c_.attn_logit_softcap);
    return spec;
  }

  // gpt-oss's per-head sink logits join the spec of its layers.
  graph::AttentionSpec attention_spec_with_sinks(int il, const LayerConfig& lc,
                                                 const std::string& blk) {
    graph::AttentionSpec spec = attention_spec(il, lc);
    if (c_.attn_sinks) spec.sinks = weight(blk + ".attn_sinks.weight");
    return spec;
  }

  Value ffn(int il, Value h, const std::string& blk) {
    if (c_.n_experts == 0 || il < c_.n_dense_lead) return dense_ffn(h, blk);
    return moe_ffn(h, blk);
  }

  Value layer(int il, Value x, Value& kv) {
    const std::string blk = "blk." + std::to_string(il);
    const LayerConfig& lc = c_.layers[il];

    if (c_.parallel_block) return parallel_layer(il, x, kv);
    Value h = c_.pre_norms ? norm(x, blk + ".attn_norm") : x;
    Value o = c_.mla ? mla_attention(il, h, kv, lc, blk) : attention(il, h, kv, lc, blk);
    // Under tensor parallelism o is this rank's heads' share: the sum over ranks is the output.
    if (c_.tp_size > 1) o = b_.all_reduce(o);
    if (c_.post_norms) o = b_.rms_norm(o, weight(blk + ".post_attention_norm.weight"), c_.rms_eps);
    if (c_.residual_scale != 1.0) o = b_.scale(o, c_.residual_scale);
    x = b_.add(x, o);

    h = c_.pre_norms ? norm(x, blk + "." + c_.ffn_norm) : x;
    Value d = ffn(il, h, blk);
    if (c_.tp_size > 1) d = b_.all_reduce(d);  // this rank's FFN columns' share, summed
    if (c_.post_norms) d = b_.rms_norm(d, weight(blk + ".post_ffw_norm.weight"), c_.rms_eps);
    if (c_.residual_scale != 1.0) d = b_.scale(d, c_.residual_scale);
    return b_.add(x, d);
  }

  // Command-R, Falcon: attention and FFN read the same normed input (Falcon 40B: the attention
  // its own, attn_norm_2) and join the residual together, x + attn + ffn, in transformers' order.
  Value parallel_layer(int il, Value x, Value& kv) {
    const std::string blk = "blk." + std::to_string(il);
    Value h = norm(x, blk + ".attn_norm");
    Value h_attn = has_weight(blk + ".attn_norm_2.weight") ? norm(x, blk + ".attn_norm_2") : h;
    Value o = attention(il, h_attn, kv, c_.layers[il], blk);
    Value d = ffn(il, h, blk);
    if (c_.tp_size > 1) {  // each rank's share of both, summed
      o = b_.all_reduce(o);
      d = b_.all_reduce(d);
    }
    return b_.add(b_.add(x, o), d);
  }

  Value attention(int il, Value h, Value& kv, const LayerConfig& lc, const std::string& blk) {
    Value q = linear(h, blk + ".attn_q");
    Value k = linear(h, blk + ".attn_k");
    Value v = linear(h, blk + ".attn_v");
    if (c_.qk_norm) {
      q = head_norm(q, c_.n_heads, blk + ".attn_q_norm.weight");
      k = head_norm(k, c_.n_kv_heads, blk + ".attn_k_norm.weight");
    }
    if (c_.qk_norm_full) {
      q = b_.rms_norm(q, weight(blk + ".attn_q_norm.weight"), c_.rms_eps);
      k = b_.rms_norm(k, weight(blk + ".attn_k_norm.weight"), c_.rms_eps);
    }
    q = rope(q, lc);
    k = rope(k, lc);
    kv = b_.kv_write(kv, k, v, slots_, il);
    Value attn = b_.attention(q, kv, block_table_, seq_lens_, positions_, token_seq_,
                              attention_spec_with_sinks(il, lc, blk));
    return linear(attn, blk + ".attn_output");  // gpt-oss: with its bias
  }

  const ModelConfig& c_;
  const WeightLookup& weights_;
  const ForwardShape& s_;
  Builder b_;
  Value ids_, positions_, token_seq_, slots_, block_table_, seq_lens_;
  std::optional<Value> rope_factors_;
};

}  // namespace

graph::ValueType kv_state_type(const ModelConfig& config, const ForwardShape& shape) {
  if (shape.kv_dtype == kernels::KvDtype::Q8) {
    const kernels::KvGeometry g{config.n_layers,   shape.kv_pages,  shape.page_size,
                                config.n_kv_heads, config.head_dim, shape.kv_dtype};
    return {DType::I8, Shape{static_cast<int64_t>(kernels::kv_pool_bytes(g))}};
  }
  const int64_t kv_dim = static_cast<int64_t>(config.n_kv_heads) * config.head_dim;
  return {DType::F16, Shape{2 * static_cast<int64_t>(config.n_layers), shape.kv_pages,
                            shape.page_size, kv_dim}};
}

graph::Graph build_forward(const ModelConfig& config, const WeightLookup& weights,
                           const ForwardShape& shape, const std::string& name) {
  return ForwardBuilder(config, weights, shape, name).build();
}

}  // namespace kiln::model
