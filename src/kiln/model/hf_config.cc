#include "kiln/model/hf_config.h"

#include <cmath>
#include <limits>
#include <numbers>
#include <optional>

#include "kiln/base/error.h"
#include "kiln/model/architecture_traits.h"
#include "kiln/model/deepseek_config.h"
#include "kiln/model/model_limits.h"

namespace kiln::model {
namespace {

using nlohmann::json;

const json* find(const json& c, const char* key) {
  auto it = c.find(key);
  return it == c.end() || it->is_null() ? nullptr : &*it;
}

int64_t get_int(const json& c, const char* key) {
  const json* v = find(c, key);
  KILN_CHECK(v != nullptr && v->is_number_integer(), "config.json: '{}' must be an integer", key);
  return v->get<int64_t>();
}

std::optional<int64_t> try_int(const json& c, const char* key) {
  const json* v = find(c, key);
  if (v == nullptr) return std::nullopt;
  KILN_CHECK(v->is_number_integer(), "config.json: '{}' must be an integer", key);
  return v->get<int64_t>();
}

// An integer key that kiln stores as int: a value outside int's range is refused, not truncated.
int get_int32(const json& c, const char* key) {
  const int64_t v = get_int(c, key);
  KILN_CHECK(v >= std::numeric_limits<int>::min() && v <= std::numeric_limits<int>::max(),
             "config.json: '{}' = {} is out of range", key, v);
  return static_cast<int>(v);
}

std::optional<int> try_int32(const json& c, const char* key) {
  if (find(c, key) == nullptr) return std::nullopt;
  return get_int32(c, key);
}

std::optional<double> try_number(const json& c, const char* key) {
  const json* v = find(c, key);
  if (v == nullptr) return std::nullopt;
  KILN_CHECK(v->is_number(), "config.json: '{}' must be a number", key);
  return v->get<double>();
}

std::optional<bool> try_bool(const json& c, const char* key) {
  const json* v = find(c, key);
  if (v == nullptr) return std::nullopt;
  KILN_CHECK(v->is_boolean(), "config.json: '{}' must be true or false", key);
  return v->get<bool>();
}

std::optional<std::string> try_string(const json& c, const char* key) {
  const json* v = find(c, key);
  if (v == nullptr) return std::nullopt;
  KILN_CHECK(v->is_string(), "config.json: '{}' must be a string", key);
  return v->get<std::string>();
}

const HfArchitecture& architecture(const json& c) {
  const std::string model_type = try_string(c, "model_type").value_or("");
  std::string hf_class;
  if (const json* a = find(c, "architectures")) {
    KILN_CHECK(a->is_array() && a->size() == 1 && (*a)[0].is_string(),
               "config.json: 'architectures' must list one class");
    hf_class = (*a)[0].get<std::string>();
  }
  for (const HfArchitecture& n : kHfArchitectures) {
    if (hf_class.empty() ? model_type == n.model_type : hf_class == n.hf_class) {
      KILN_CHECK(model_type.empty() || model_type == n.model_type,
                 "config.json: model_type '{}' does not match architecture {} (expected '{}')",
                 model_type, n.hf_class, n.model_type);
      return n;
    }
  }
  // A BERT folder is an embedding model, which kiln runs apart from the decoders.
  const char* bert_hint = model_type == "bert"
                              ? " (a BERT encoder only embeds: `kiln embed`, or `kiln serve` for "
                                "/v1/embeddings)"
                              : "";
  fail("unsupported architecture '{}' (model_type '{}'){}; kiln supports {}",
       hf_class.empty() ? "?" : hf_class, model_type, bert_hint, supported_hf_classes());
}

// RoPE of one kind of layer: transformers 5 writes `rope_parameters` (per layer type for
// Gemma 3: {"full_attention": {...}, "sliding_attention": {...}}), transformers 4 wrote
// `rope_theta` (+ Gemma 3's `rope_local_base_freq`) and `rope_scaling`.
struct Rope {
  double theta = 10000.0;
  std::string type = "default";
  json scaling;  // the object that holds the scaling's parameters
};

Rope read_rope(const json& c, const char* layer_type, double default_theta, bool yarn_ok = false) {
  Rope r;
  r.theta = default_theta;
  json params = json::object();
  if (const json* p = find(c, "rope_parameters")) {
    KILN_CHECK(p->is_object(), "config.json: 'rope_parameters' must be an object");
    params = p->contains(layer_type) ? p->at(layer_type) : *p;
  } else if (const json* s = find(c, "rope_scaling")) {
    KILN_CHECK(s->is_object(), "config.json: 'rope_scaling' must be an object");
    params = *s;
  }
  if (auto t = try_number(params, "rope_theta")) r.theta = *t;
  r.type = try_string(params, "rope_type").value_or(try_string(params, "type").value_or("default"));
  r.scaling = params;
  KILN_CHECK(r.type == "default" || r.type == "llama3" || (yarn_ok && r.type == "yarn"),
             "rope scaling '{}' is not implemented (kiln implements none and llama3's); refusing "
             "to run with wrong positions",
             r.type);
  return r;
}

// Which layers slide: `layer_types` when given, else a period n (layer il slides unless
// il % n == n - 1), as in read_model_config's GGUF keys.
std::vector<bool> sliding_layers(const json& c, int n_layers, int default_period) {
  std::vector<bool> sliding(static_cast<size_t>(n_layers), false);
  if (const json* types = find(c, "layer_types")) {
    KILN_CHECK(types->is_array() && static_cast<int>(types->size()) == n_layers,
               "config.json: 'layer_types' must list {} layers", n_layers);
    for (int il = 0; il < n_layers; ++il) {
      const json& t = (*types)[il];
      KILN_CHECK(t == "sliding_attention" || t == "full_attention",
                 "config.json: layer type {} is not supported", t.dump());
      sliding[il] = t == "sliding_attention";
    }
    return sliding;
  }
  const int64_t period =
      try_int(c, "sliding_window_pattern")
          .value_or(try_int(c, "_sliding_window_pattern").value_or(default_period));
  for (int il = 0; il < n_layers; ++il) sliding[il] = period > 0 && il % period < period - 1;
  return sliding;
}

void read_gemma(const json& c, const ArchitectureTraits& t, HfModelConfig& h) {
  ModelConfig& m = h.config;
  h.gemma_norm_offset = true;
  const std::string act = try_string(c, "hidden_activation")
                              .value_or(try_string(c, "hidden_act").value_or("gelu_pytorch_tanh"));
  KILN_CHECK(act == "gelu_pytorch_tanh", "activation '{}' is not supported for {}", act, m.arch);
  const double query_scalar = try_number(c, "query_pre_attn_scalar").value_or(m.head_dim);
  KILN_CHECK(query_scalar > 0, "config.json: 'query_pre_attn_scalar' must be positive");
  m.attention_scale = 1.0 / std::sqrt(query_scalar);
  m.attn_logit_softcap = try_number(c, "attn_logit_softcapping").value_or(0.0);
  m.final_logit_softcap = try_number(c, "final_logit_softcapping").value_or(0.0);
  const int window = try_int32(c, "sliding_window").value_or(t.default_sliding_window);
  const Rope full = read_rope(c, "full_attention", 10000.0);
  const Rope local = read_rope(c, "sliding_attention",
                               t.local_rope_uses_global_base
                                   ? full.theta
                                   : try_number(c, "rope_local_base_freq").value_or(10000.0));
  KILN_CHECK(full.type == "default" && local.type == "default",
             "rope scaling '{}' is not implemented for {}; refusing to run with wrong positions",
             full.type == "default" ? local.type : full.type, m.arch);
  const auto sliding = sliding_layers(c, m.n_layers, t.sliding_period);
  for (int il = 0; il < m.n_layers; ++il) {
    const bool slides = window > 0 && sliding[il];
    m.layers[il] = {slides, slides ? window : 0, slides ? local.theta : full.theta};
  }
}

// gpt-oss: layer_types (or every other layer) slide by sliding_window, one RoPE (YaRN as
// rope_parameters say, truncation included), attention sinks, the experts' SwiGLU constants.
void read_gpt_oss(const json& c, const ArchitectureTraits& t, HfModelConfig& h) {
  ModelConfig& m = h.config;
  m.n_rot = m.head_dim;
  m.attn_sinks = true;
  m.swiglu_alpha = try_number(c, "swiglu_alpha").value_or(m.swiglu_alpha);
  m.swiglu_limit = try_number(c, "swiglu_limit").value_or(m.swiglu_limit);
  KILN_CHECK(m.swiglu_limit > 0, "config.json: 'swiglu_limit' must be positive");
  const Rope rope =
      read_rope(c, "full_attention", try_number(c, "rope_theta").value_or(150000.0), true);
  const int window = try_int32(c, "sliding_window").value_or(0);
  const auto sliding = sliding_layers(c, m.n_layers, t.sliding_period);
  for (int il = 0; il < m.n_layers; ++il) {
    const bool slides = window > 0 && sliding[il];
    m.layers[il] = {slides, slides ? window : 0, rope.theta};
  }
  if (rope.type != "yarn") return;
  KILN_CHECK(!try_number(rope.scaling, "attention_factor").has_value(),
             "config.json: YaRN with an explicit attention_factor is not implemented");
  const auto original = try_number(rope.scaling, "original_max_position_embeddings");
  const auto factor = try_number(rope.scaling, "factor");
  KILN_CHECK(original && factor,
             "config.json: YaRN needs 'factor' and 'original_max_position_embeddings'");
  set_gpt_oss_yarn(m, rope.theta, *factor, *original,
                   try_number(rope.scaling, "beta_fast").value_or(32.0),
                   try_number(rope.scaling, "beta_slow").value_or(1.0),
                   try_bool(rope.scaling, "truncate").value_or(true));
  h.rope_freq_factors = m.computed_rope_factors;
}

// Mixtral's router always renormalizes its top-k and its experts are intermediate_size wide;
// Qwen3-MoE says both (norm_topk_prob, moe_intermediate_size).
void read_moe(const json& c, const HfArchitecture& name, ModelConfig& m) {
  // gpt-oss's experts are intermediate_size wide too.
  const bool mixtral = name.model_type == "mixtral" || name.model_type == "gpt_oss";
  m.n_experts = try_int32(c, "num_experts").value_or(try_int32(c, "num_local_experts").value_or(0));
  m.n_experts_used = get_int32(c, "num_experts_per_tok");
  m.n_ff_expert = get_int32(c, mixtral ? "intermediate_size" : "moe_intermediate_size");
  m.expert_weights_norm = mixtral || try_bool(c, "norm_topk_prob").value_or(false);
  KILN_CHECK(m.n_experts > 0 && m.n_experts_used > 0 && m.n_experts_used <= m.n_experts &&
                 m.n_ff_expert > 0,
             "invalid experts: {} used of {}, expert width {}", m.n_experts_used, m.n_experts,
             m.n_ff_expert);
  const json* dense = find(c, "mlp_only_layers");
  KILN_CHECK(try_int(c, "decoder_sparse_step").value_or(1) == 1 &&
                 (dense == nullptr || (dense->is_array() && dense->empty())),
             "config.json: dense layers between MoE layers (decoder_sparse_step, "
             "mlp_only_layers) are not supported");
  KILN_CHECK(try_int(c, "shared_expert_intermediate_size").value_or(0) == 0 &&
                 try_int(c, "n_shared_experts").value_or(0) == 0,
             "config.json: shared experts (shared_expert_intermediate_size, n_shared_experts) are "
             "not supported");
}

// Whether the model's FFNs are mixtures of experts: by its row, and for the rows that may be
// either (llama: Mixtral), by its class. A dense row whose config has experts is refused.
bool has_experts(const json& c, const HfArchitecture& name, const ArchitectureTraits& t) {
  switch (t.experts) {
    case Experts::kAlways:
      return true;
    case Experts::kWhenKeyed:
      if (name.model_type == "mixtral") return true;
      break;
    case Experts::kNever:
      break;
  }
  KILN_CHECK(try_int(c, "num_local_experts").value_or(0) == 0 &&
                 try_int(c, "num_experts").value_or(0) == 0,
             "config.json: {} with mixture-of-experts FFNs (num_local_experts, num_experts) is not "
             "supported",
             name.hf_class);
  return false;
}

// Falcon's KV heads: num_kv_heads in the new decoder architecture (40B, 180B), else one
// (multi_query: 7B) or one per query head.
int falcon_kv_heads(const json& c, int n_heads) {
  if (try_bool(c, "new_decoder_architecture").value_or(false)) {
    return try_int32(c, "num_kv_heads").value_or(n_heads);
  }
  return try_bool(c, "multi_query").value_or(true) ? 1 : n_heads;
}

// The Falcon variants kiln does not run (llama.cpp's falcon does not either): ALiBi instead of
// RoPE, biases on the projections, the attention and the MLP one after the other.
void refuse_falcon_variants(const json& c) {
  KILN_CHECK(!try_bool(c, "alibi").value_or(false),
             "config.json: Falcon with ALiBi positions (alibi) is not supported");
  KILN_CHECK(!try_bool(c, "bias").value_or(false),
             "config.json: Falcon with biases on its projections (bias) is not supported");
  KILN_CHECK(try_bool(c, "new_decoder_architecture").value_or(false) ||
                 try_bool(c, "parallel_attn").value_or(true),
             "config.json: Falcon with the attention and the MLP in sequence (parallel_attn false) "
             "is not supported");
}

// config.json's hidden_act for the row's FFN (the ACT2FN names of transformers).
std::string expected_activation(const ArchitectureTraits& t) {
  switch (t.plain_ffn) {
    case PlainFfn::kGeluTanh:
      return "gelu_pytorch_tanh";
    case PlainFfn::kGeluErf:
      return "gelu";
    case PlainFfn::kNone:
      break;
  }
  return "silu";
}

}  // namespace

std::vector<float> llama3_rope_factors(int n_rot, double theta, double factor,
                                       double low_freq_factor, double high_freq_factor,
                                       double original_context) {
  // Wavelengths shorter than original_context / high_freq_factor keep their frequency, longer
  // than original_context / low_freq_factor are divided by `factor`, and the ones between
  // blend the two smoothly.
  const double low_wavelen = original_context / low_freq_factor;
  const double high_wavelen = original_context / high_freq_factor;
  std::vector<float> out;
  for (int i = 0; i < n_rot; i += 2) {
    const double freq = 1.0 / std::pow(theta, static_cast<double>(i) / n_rot);
    const double wavelen = 2 * std::numbers::pi / freq;
    double f = 1.0;
    if (wavelen > low_wavelen) {
      f = factor;
    } else if (wavelen >= high_wavelen) {
      const double smooth =
          (original_context / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
      f = 1.0 / ((1 - smooth) / factor + smooth);
    }
    out.push_back(static_cast<float>(f));
  }
  return out;
}

HfModelConfig model_config_from_hf(const json& c) {
  KILN_CHECK(c.is_object(), "config.json is not a JSON object");
  const HfArchitecture& name = architecture(c);
  const ArchitectureTraits& traits = architecture_traits(name.arch);
  HfModelConfig h;
  h.model_type = name.model_type;
  ModelConfig& m = h.config;
  m.arch = name.arch;
  const bool moe = has_experts(c, name, traits);
  m.n_layers = get_int32(c, "num_hidden_layers");
  m.n_embd = get_int32(c, "hidden_size");
  const bool falcon = name.arch == "falcon";
  if (falcon) {
    m.n_ff = try_int32(c, "ffn_hidden_size").value_or(4 * m.n_embd);
  } else {
    m.n_ff =
        moe ? try_int32(c, "intermediate_size").value_or(1) : get_int32(c, "intermediate_size");
  }
  m.n_heads = get_int32(c, "num_attention_heads");
  m.n_kv_heads = falcon ? falcon_kv_heads(c, m.n_heads)
                        : try_int32(c, "num_key_value_heads").value_or(m.n_heads);
  // Falcon's config.json may leave the context out: 2048, as its converter writes.
  m.context_length = falcon ? try_int(c, "max_position_embeddings").value_or(2048)
                            : get_int(c, "max_position_embeddings");
  m.rms_eps = try_number(c, "rms_norm_eps").value_or(1e-6);
  m.vocab = get_int(c, "vocab_size");
  KILN_CHECK(m.n_layers > 0 && m.n_embd > 0 && m.n_ff > 0 && m.n_heads > 0 && m.n_kv_heads > 0 &&
                 m.vocab > 0 && m.context_length > 0,
             "config.json: model dimensions must be positive");
  KILN_CHECK(m.n_layers <= kMaxLayers,
             "config.json: num_hidden_layers {} is more than kiln supports ({})", m.n_layers,
             kMaxLayers);
  KILN_CHECK(m.n_heads % m.n_kv_heads == 0,
             "num_attention_heads {} is not a multiple of num_key_value_heads {}", m.n_heads,
             m.n_kv_heads);
  if (name.arch == "deepseek2") {
    m.layers.resize(m.n_layers);
    m.tied_output = try_bool(c, "tie_word_embeddings").value_or(false);
    apply_architecture_traits(traits, m);
    read_deepseek_hf(c, name.model_type == "deepseek_v3", m);
    h.rope_freq_factors = m.computed_rope_factors;
    return h;
  }
  m.head_dim = try_int32(c, "head_dim").value_or(m.n_embd / m.n_heads);
  KILN_CHECK(m.head_dim > 0 && m.head_dim % 2 == 0, "head_dim {} must be even", m.head_dim);
  m.layers.resize(m.n_layers);
  m.attention_scale = 1.0 / std::sqrt(static_cast<double>(m.head_dim));
  // Gemma and Falcon tie their LM head unless the config says otherwise.
  m.tied_output = try_bool(c, "tie_word_embeddings").value_or(traits.gemma || falcon);
  apply_architecture_traits(traits, m);
  // Hugging Face checkpoints keep Q/K rows in the order of rotate_half (NeoX pairs i, i + n/2),
  // Llama and Mistral included; Cohere's rotate_half rotates adjacent pairs.
  m.rope_neox = name.arch != "command-r";

  if (traits.gemma) {
    read_gemma(c, traits, h);
    m.n_rot = m.head_dim;
    return h;
  }
  if (name.arch == "gpt-oss") {
    read_gpt_oss(c, traits, h);
    read_moe(c, name, m);
    return h;
  }

  // Every other family: SiLU (or its row's plain FFN's GELU), no post norms, one RoPE for every
  // layer.
  const std::string act =
      try_string(c, falcon ? "activation" : "hidden_act").value_or(expected_activation(traits));
  KILN_CHECK(act == expected_activation(traits), "activation '{}' is not supported for {}", act,
             m.arch);
  if (traits.layer_norm) {
    m.rms_eps = try_number(c, "norm_epsilon")
                    .value_or(try_number(c, "layer_norm_eps")
                                  .value_or(try_number(c, "layer_norm_epsilon").value_or(1e-5)));
  }
  if (!traits.qkv_bias) {
    KILN_CHECK(
        !try_bool(c, "attention_bias").value_or(false) && !try_bool(c, "mlp_bias").value_or(false),
        "config.json: attention_bias / mlp_bias are not supported for {}", m.arch);
  }
  const Rope rope = read_rope(c, "full_attention", try_number(c, "rope_theta").value_or(10000.0));
  double partial = try_number(c, "partial_rotary_factor").value_or(1.0);
  if (auto p = try_number(rope.scaling, "partial_rotary_factor")) partial = *p;
  // Checked before the product is converted to int (a huge factor would not fit).
  KILN_CHECK(partial > 0 && partial <= 1, "config.json: partial_rotary_factor {} must be in (0, 1]",
             partial);
  m.n_rot = static_cast<int>(m.head_dim * partial);
  KILN_CHECK(m.n_rot > 0 && m.n_rot % 2 == 0 && m.n_rot <= m.head_dim,
             "rotary dimensions {} must be even and at most head_dim {}", m.n_rot, m.head_dim);
  if (rope.type == "llama3") {
    auto need = [&](const char* key) {
      auto v = try_number(rope.scaling, key);
      KILN_CHECK(v.has_value(), "config.json: llama3 rope scaling needs '{}'", key);
      return *v;
    };
    h.rope_freq_factors =
        llama3_rope_factors(m.n_rot, rope.theta, need("factor"), need("low_freq_factor"),
                            need("high_freq_factor"), need("original_max_position_embeddings"));
    m.rope_freq_factors = true;
  }
  // StarCoder 2 slides every layer when its config sets a window (as transformers does; GGUF
  // files do not carry it).
  const int window = m.arch == "starcoder2" ? try_int32(c, "sliding_window").value_or(0) : 0;
  for (auto& layer : m.layers) layer = {window > 0, window, rope.theta};
  // Hugging Face's Phi-3 always stores qkv_proj and gate_up_proj fused, Falcon its
  // query_key_value (its FFN has no gate).
  if (traits.fused_projections) {
    m.fused_qkv = true;
    m.fused_gate_up = m.gated_ffn;
  }
  if (falcon) refuse_falcon_variants(c);
  if (moe) read_moe(c, name, m);
  if (m.arch == "granite") {
    if (auto a = try_number(c, "attention_multiplier")) m.attention_scale = *a;
    m.embedding_scale = try_number(c, "embedding_multiplier").value_or(1.0);
    m.residual_scale = try_number(c, "residual_multiplier").value_or(1.0);
    m.logit_scale = try_number(c, "logits_scaling").value_or(1.0);
    KILN_CHECK(m.logit_scale > 0, "config.json: 'logits_scaling' must be positive");
  }
  if (m.arch == "command-r") {
    KILN_CHECK(!try_bool(c, "use_qk_norm").value_or(false),
               "config.json: use_qk_norm (Command-R+'s Q/K LayerNorms) is not supported");
    m.logit_multiplier = try_number(c, "logit_scale").value_or(1.0);
    KILN_CHECK(m.logit_multiplier > 0, "config.json: 'logit_scale' must be positive");
  }
  return h;
}

}  // namespace kiln::model
