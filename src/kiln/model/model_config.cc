#include "kiln/model/model_config.h"

#include <cmath>

#include "kiln/base/error.h"
#include "kiln/model/architecture_traits.h"
#include "kiln/model/deepseek_config.h"
#include "kiln/model/gguf.h"
#include "kiln/model/model_limits.h"

namespace kiln::model {
namespace {

// Which layers use sliding-window attention. The key `attention.sliding_window_pattern` is
// either a period n (layer il is local unless il % n == n - 1: n = 6 makes layers 5, 11, 17
// global) or, in newer converters, one bool per layer. Absent: the architecture's default.
std::vector<bool> sliding_layers(const GgufFile& file, const std::string& p, int n_layers,
                                 int default_period) {
  const std::string key = p + "attention.sliding_window_pattern";
  std::vector<bool> sliding(static_cast<size_t>(n_layers), false);
  const GgufValue* v = file.find(key);
  if (v != nullptr && v->array() != nullptr) {
    const auto* flags = v->array()->get_if<bool>();
    KILN_CHECK(flags != nullptr && static_cast<int>(flags->size()) == n_layers,
               "metadata key '{}' must be a u32 period or {} bools", key, n_layers);
    for (int il = 0; il < n_layers; ++il) sliding[il] = (*flags)[il];
    return sliding;
  }
  const int period = static_cast<int>(file.try_get_u32(key).value_or(default_period));
  for (int il = 0; il < n_layers; ++il) sliding[il] = period > 0 && il % period < period - 1;
  return sliding;
}

// Refuses every RoPE variant kiln does not implement instead of running with wrong positions.
// Llama 3's scaling is not a key: the converter writes its per-dimension factors as the tensor
// kRopeFreqsTensor, which the forward pass applies. gpt-oss's YaRN is read by read_gpt_oss.
void check_rope_scaling(const GgufFile& file, const std::string& p, bool yarn_ok) {
  auto scaling = file.try_get_string(p + "rope.scaling.type");
  KILN_CHECK(!scaling || *scaling == "none" || (yarn_ok && *scaling == "yarn"),
             "rope scaling '{}' is not implemented (kiln implements none and llama3's "
             "rope_freqs); refusing to run with wrong positions",
             *scaling);
  for (const char* t : {"rope_factors_long.weight", "rope_factors_short.weight"}) {
    KILN_CHECK(!file.has_tensor(t),
               "the model uses LongRoPE (tensor '{}'), which kiln does not implement; refusing "
               "to run with wrong positions",
               t);
  }
}

// Gemma scales queries by 1/sqrt(query_pre_attn_scalar), which the GGUF does not store: like
// llama.cpp, kiln knows the model where it is n_embd / n_heads rather than head_dim (the 27B) by
// its depth.
double gemma_attention_scale(const ModelConfig& c, const ArchitectureTraits& t) {
  const double d = c.n_layers == t.layers_scaled_by_embd_per_head
                       ? static_cast<double>(c.n_embd / c.n_heads)
                       : static_cast<double>(c.head_dim);
  return 1.0 / std::sqrt(d);
}

// Which layers slide, how far, and their RoPE bases (Gemma 2 always slides, 4096 when the key
// is absent; Gemma 3 only with a window key).
void read_sliding_layers(const GgufFile& file, const std::string& p, const ArchitectureTraits& t,
                         ModelConfig& c, double rope_base) {
  const int window = static_cast<int>(
      file.try_get_u32(p + "attention.sliding_window").value_or(t.default_sliding_window));
  const double swa_base = file.try_get_f32(p + "rope.freq_base_swa")
                              .value_or(t.local_rope_uses_global_base ? rope_base : 10000.0);
  const auto sliding = sliding_layers(file, p, c.n_layers, t.sliding_period);
  for (int il = 0; il < c.n_layers; ++il) {
    const bool local = window > 0 && sliding[il];
    c.layers[il] = {local, local ? window : 0, local ? swa_base : rope_base};
  }
}

// Keys of mixture-of-experts variants kiln does not model; each one's presence (with a value
// other than the plain one) is refused with what it would need, instead of running a model
// that silently drops part of its FFN or routes differently.
void refuse_moe_variants(const GgufFile& file, const std::string& p) {
  const uint32_t shared = file.try_get_u32(p + "expert_shared_count").value_or(0);
  const uint32_t shared_ff = file.try_get_u32(p + "expert_shared_feed_forward_length").value_or(0);
  KILN_CHECK(shared == 0 && shared_ff == 0,
             "the model has shared experts ({}expert_shared_count {}, "
             "expert_shared_feed_forward_length {}), which kiln's mixture-of-experts FFN does not "
             "run",
             p, shared, shared_ff);
  // llama.cpp's gating functions: 1 softmax, 2 sigmoid, 3 sqrt(softplus).
  const uint32_t gating = file.try_get_u32(p + "expert_gating_func").value_or(1);
  KILN_CHECK(gating == 1,
             "expert gating function {} ({}expert_gating_func) is not supported: kiln routes with "
             "the softmax of the router logits",
             gating, p);
  const uint32_t groups = file.try_get_u32(p + "expert_group_count").value_or(1);
  KILN_CHECK(groups <= 1, "group-limited expert routing ({}expert_group_count {}) is not supported",
             p, groups);
  const uint32_t dense = file.try_get_u32(p + "leading_dense_block_count").value_or(0);
  KILN_CHECK(dense == 0,
             "dense layers before the mixture-of-experts layers ({}leading_dense_block_count {}) "
             "are not supported",
             p, dense);
}

void read_moe(const GgufFile& file, const std::string& p, ModelConfig& c, bool deepseek) {
  c.n_experts = static_cast<int>(file.get_u32(p + "expert_count"));
  c.n_experts_used = static_cast<int>(file.get_u32(p + "expert_used_count"));
  // Mixtral's files (architecture llama) give no expert width: its experts are
  // feed_forward_length wide, as llama.cpp reads them.
  const auto expert_ff = file.try_get_u32(p + "expert_feed_forward_length");
  KILN_CHECK(expert_ff.has_value() || file.has_key(p + "feed_forward_length"),
             "missing metadata key '{}expert_feed_forward_length' (the experts' width)", p);
  c.n_ff_expert = static_cast<int>(expert_ff.value_or(c.n_ff));
  // Qwen3-MoE renormalizes (norm_topk_prob) unless the key says otherwise (converters do not
  // always write it); llama.cpp's Llama graph (Mixtral) always does, whatever the key.
  c.expert_weights_norm =
      c.arch == "llama" || file.try_get_bool(p + "expert_weights_norm").value_or(true);
  KILN_CHECK(c.n_experts > 0 && c.n_experts_used > 0 && c.n_experts_used <= c.n_experts &&
                 c.n_ff_expert > 0,
             "invalid experts: {} used of {}, expert width {}", c.n_experts_used, c.n_experts,
             c.n_ff_expert);
  if (!deepseek) refuse_moe_variants(file, p);  // DeepSeek's are read by read_deepseek2_rest
  // Files from before llama.cpp stacked the experts (early 2024) store one tensor per expert.
  KILN_CHECK(!file.has_tensor("blk.0.ffn_gate.0.weight"),
             "the model stores one tensor per expert (blk.0.ffn_gate.0.weight), the layout of "
             "GGUF files from before llama.cpp stacked them into ffn_*_exps; convert the model "
             "again");
}

// gpt-oss beyond its row: sinks in every layer, and its YaRN (rope.scaling.* keys as the
// converter writes them from config.json's rope_parameters) when the file says so.
void read_gpt_oss(const GgufFile& file, const std::string& p, ModelConfig& c, double rope_base) {
  c.attn_sinks = true;
  KILN_CHECK(file.has_tensor("blk.0.attn_sinks.weight"),
             "the gpt-oss file has no tensor 'blk.0.attn_sinks.weight' (attention sinks)");
  KILN_CHECK(!file.has_tensor(kRopeFreqsTensor), "a gpt-oss file with '{}' is not supported",
             kRopeFreqsTensor);
  if (file.try_get_string(p + "rope.scaling.type").value_or("none") != "yarn") return;
  const double attn_factor = file.try_get_f32(p + "rope.scaling.yarn_attn_factor").value_or(1.0f);
  KILN_CHECK(attn_factor == 1.0, "YaRN with attn_factor {} is not implemented", attn_factor);
  set_gpt_oss_yarn(c, rope_base, file.get_f32(p + "rope.scaling.factor"),
                   file.get_u32(p + "rope.scaling.original_context_length"),
                   file.try_get_f32(p + "rope.scaling.yarn_beta_fast").value_or(32.0f),
                   file.try_get_f32(p + "rope.scaling.yarn_beta_slow").value_or(1.0f),
                   /*truncate=*/false);
}

// Command-R beyond its row: the logit multiplier (optional, as llama.cpp reads it: absent or 0
// is none), and a refusal of the Q/K LayerNorms of Command-R+ (one weight row per head, which
// llama.cpp loads only for 64 layers and more) instead of running without them.
void read_command_r(const GgufFile& file, const std::string& p, ModelConfig& c) {
  const double scale = file.try_get_f32(p + "logit_scale").value_or(0.0f);
  KILN_CHECK(scale >= 0, "{}logit_scale must not be negative", p);
  if (scale > 0) c.logit_multiplier = scale;
  KILN_CHECK(!file.has_tensor("blk.0.attn_q_norm.weight"),
             "the command-r model has Q/K norms (blk.0.attn_q_norm.weight: Command-R+), which kiln "
             "does not run");
}

// Whether the file's FFNs are mixtures of experts: always, never, or (Mixtral, architecture
// llama) when it has expert_count. A dense-only architecture whose file has experts is refused
// here rather than by a missing dense tensor later.
bool has_experts(const GgufFile& file, const std::string& p, const ArchitectureTraits& t) {
  const bool keyed = file.try_get_u32(p + "expert_count").value_or(0) > 0;
  switch (t.experts) {
    case Experts::kAlways:
      return true;
    case Experts::kWhenKeyed:
      return keyed;
    case Experts::kNever:
      break;
  }
  KILN_CHECK(!keyed && !file.has_tensor("blk.0.ffn_gate_inp.weight"),
             "the {} model has mixture-of-experts FFNs ({}expert_count, ffn_gate_inp), which kiln "
             "runs only for llama (Mixtral) and qwen3moe",
             t.arch, p);
  return false;
}

// Head width (key_length, equal to value_length) and rotary dimensions.
void read_head_dims(const GgufFile& file, const std::string& p, ModelConfig& c) {
  c.head_dim =
      static_cast<int>(file.try_get_u32(p + "attention.key_length").value_or(c.n_embd / c.n_heads));
  uint32_t value_length = file.try_get_u32(p + "attention.value_length").value_or(c.head_dim);
  KILN_CHECK(static_cast<int>(value_length) == c.head_dim,
             "key_length {} != value_length {} is not supported", c.head_dim, value_length);
  KILN_CHECK(c.head_dim > 0 && c.head_dim % 2 == 0, "head_dim {} must be even", c.head_dim);
  c.n_rot = static_cast<int>(file.try_get_u32(p + "rope.dimension_count").value_or(c.head_dim));
  KILN_CHECK(c.n_rot > 0 && c.n_rot % 2 == 0 && c.n_rot <= c.head_dim,
             "rope.dimension_count {} must be even and at most head_dim {}", c.n_rot, c.head_dim);
}

}  // namespace

void apply_architecture_traits(const ArchitectureTraits& t, ModelConfig& c) {
  c.qkv_bias = t.qkv_bias;
  c.qk_norm = t.qk_norm;
  c.post_norms = t.gemma;
  c.scale_embeddings = t.gemma;
  c.activation = t.gemma ? Activation::GeluTanh : Activation::Silu;
  c.layer_norm = t.layer_norm;
  c.gated_ffn = t.plain_ffn == PlainFfn::kNone;
  if (t.plain_ffn == PlainFfn::kGeluTanh) c.activation = Activation::GeluTanh;
  if (t.plain_ffn == PlainFfn::kGeluErf) c.activation = Activation::GeluErf;
  c.parallel_block = t.parallel_block;
  if (t.arch == "olmo2") {
    c.post_norms = true;
    c.pre_norms = false;
    c.qk_norm_full = true;
  }
  if (t.arch == "gpt-oss") {
    // The converter names the pre-FFN norm post_attention_norm; the values of alpha and limit
    // are llama.cpp's constants (its files do not store them) and gpt-oss's config defaults.
    c.ffn_norm = "post_attention_norm";
    c.moe_softmax_topk = true;
    c.expert_weights_norm = false;
    c.swiglu_alpha = 1.702;
    c.swiglu_limit = 7.0;
  }
}

void set_gpt_oss_yarn(ModelConfig& c, double theta, double factor, double original_context,
                      double beta_fast, double beta_slow, bool truncate) {
  KILN_CHECK(factor > 0 && original_context > 0 && beta_fast > beta_slow && beta_slow > 0,
             "YaRN rope scaling needs factor > 0, original context > 0 and beta_fast > beta_slow "
             "> 0 (got {}, {}, {}, {})",
             factor, original_context, beta_fast, beta_slow);
  c.computed_rope_factors =
      yarn_rope_factors(c.n_rot, theta, factor, original_context, beta_fast, beta_slow, truncate);
  c.rope_freq_factors = true;
  const double m = yarn_mscale(factor, 1.0);
  c.attention_scale *= m * m;
}

ModelConfig read_model_config(const GgufFile& file) {
  ModelConfig c;
  c.arch = file.architecture();
  const ArchitectureTraits& traits = architecture_traits(c.arch);
  const std::string p = c.arch + ".";
  const bool moe = has_experts(file, p, traits);
  c.n_layers = static_cast<int>(file.get_u32(p + "block_count"));
  c.n_embd = static_cast<int>(file.get_u32(p + "embedding_length"));
  // An MoE file may omit the dense FFN width: its FFNs are n_ff_expert wide (read_moe).
  c.n_ff = static_cast<int>(moe ? file.try_get_u32(p + "feed_forward_length").value_or(1)
                                : file.get_u32(p + "feed_forward_length"));
  c.n_heads = static_cast<int>(file.get_u32(p + "attention.head_count"));
  c.n_kv_heads =
      static_cast<int>(file.try_get_u32(p + "attention.head_count_kv").value_or(c.n_heads));
  c.context_length = file.get_u32(p + "context_length");
  c.rms_eps = file.get_f32(p + (traits.layer_norm ? "attention.layer_norm_epsilon"
                                                  : "attention.layer_norm_rms_epsilon"));
  KILN_CHECK(c.n_layers > 0 && c.n_embd > 0 && c.n_ff > 0 && c.n_heads > 0 && c.n_kv_heads > 0,
             "model dimensions must be positive");
  KILN_CHECK(c.n_layers <= kMaxLayers, "block_count {} is more than kiln supports ({})", c.n_layers,
             kMaxLayers);
  KILN_CHECK(c.n_heads % c.n_kv_heads == 0, "head_count {} is not a multiple of head_count_kv {}",
             c.n_heads, c.n_kv_heads);
  const bool mla = c.arch == "deepseek2";
  if (mla) {
    read_deepseek2_dims(file, p, c);
  } else {
    read_head_dims(file, p, c);
    check_rope_scaling(file, p, c.arch == "gpt-oss");
    c.rope_freq_factors = file.has_tensor(kRopeFreqsTensor);
  }
  if (c.rope_freq_factors) {
    const auto& info = file.tensor_info(kRopeFreqsTensor);
    KILN_CHECK(info.shape.numel() == c.n_rot / 2, "tensor '{}' has {} factors, expected {}",
               kRopeFreqsTensor, info.shape.numel(), c.n_rot / 2);
  }
  const double rope_base = file.try_get_f32(p + "rope.freq_base").value_or(10000.0f);

  c.attention_scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  c.final_logit_softcap = file.try_get_f32(p + "final_logit_softcapping").value_or(0.0f);
  c.tied_output = !file.has_tensor("output.weight");
  KILN_CHECK(file.has_tensor("token_embd.weight"), "missing tensor 'token_embd.weight'");
  c.vocab = file.tensor_info("token_embd.weight").shape[0];

  c.layers.resize(c.n_layers);
  apply_architecture_traits(traits, c);
  c.rope_neox = traits.gguf_rope_neox;
  if (traits.gemma) c.attention_scale = gemma_attention_scale(c, traits);
  if (traits.attn_softcap) {
    c.attn_logit_softcap = file.try_get_f32(p + "attn_logit_softcapping").value_or(0.0f);
  }
  if (traits.sliding_period > 0) {
    read_sliding_layers(file, p, traits, c, rope_base);
  } else {
    // Phi-3's sliding window is not applied, as in llama.cpp (the converters do not describe
    // which layers slide); prompts within the window are unaffected.
    for (auto& layer : c.layers) layer = {false, 0, rope_base};
  }
  if (traits.fused_projections) {
    c.fused_qkv = file.has_tensor("blk.0.attn_qkv.weight");
    c.fused_gate_up = c.gated_ffn && !file.has_tensor("blk.0.ffn_gate.weight");
  }
  if (moe) read_moe(file, p, c, mla);
  if (mla) read_deepseek2_rest(file, p, c);
  if (c.arch == "gpt-oss") read_gpt_oss(file, p, c, rope_base);
  if (c.arch == "granite") {
    // llama.cpp requires logit_scale; the others default to no scaling.
    c.logit_scale = file.get_f32(p + "logit_scale");
    c.embedding_scale = file.try_get_f32(p + "embedding_scale").value_or(1.0f);
    c.residual_scale = file.try_get_f32(p + "residual_scale").value_or(1.0f);
    KILN_CHECK(c.logit_scale > 0, "{}logit_scale must be positive", p);
  }
  if (c.arch == "command-r") read_command_r(file, p, c);
  if (auto scale = file.try_get_f32(p + "attention.scale"); scale && *scale > 0) {
    c.attention_scale = *scale;
  }
  return c;
}

}  // namespace kiln::model
