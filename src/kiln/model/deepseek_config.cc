#include "kiln/model/deepseek_config.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <optional>

#include "kiln/base/error.h"
#include "kiln/model/gguf.h"

namespace kiln::model {
namespace {

using nlohmann::json;

// The ramp's end for a dimension pair that turns `rotations` times over the original context.
double correction_dim(double rotations, int n_rot, double theta, double original_context) {
  return n_rot * std::log(original_context / (rotations * 2 * std::numbers::pi)) /
         (2 * std::log(theta));
}

// The layers' RoPE base, the attention scale 1/sqrt(head_dim) (times YaRN's mscale squared:
// DeepSeek scales the whole q.k, its rotary and latent parts alike) and the YaRN factors.
void set_rope(ModelConfig& c, double theta, bool yarn, double factor, double original_context,
              double beta_fast, double beta_slow, double mscale_all_dim) {
  for (auto& layer : c.layers) layer = {false, 0, theta};
  c.attention_scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  if (!yarn) return;
  KILN_CHECK(factor > 0 && original_context > 0 && beta_fast > beta_slow && beta_slow > 0,
             "YaRN rope scaling needs factor > 0, original context > 0 and beta_fast > beta_slow "
             "> 0 (got {}, {}, {}, {})",
             factor, original_context, beta_fast, beta_slow);
  c.computed_rope_factors =
      yarn_rope_factors(c.n_rot, theta, factor, original_context, beta_fast, beta_slow);
  c.rope_freq_factors = true;
  const double m = yarn_mscale(factor, mscale_all_dim);
  c.attention_scale *= m * m;
}

void check_dims(const ModelConfig& c) {
  KILN_CHECK(c.kv_lora_rank > 0 && c.qk_nope_dim > 0 && c.n_rot > 0 && c.n_rot % 2 == 0 &&
                 c.v_head_dim > 0 && c.v_head_dim <= c.head_dim && c.q_lora_rank >= 0,
             "invalid latent attention: kv_lora_rank {}, q_lora_rank {}, head dims nope {} + "
             "rope {}, value {}",
             c.kv_lora_rank, c.q_lora_rank, c.qk_nope_dim, c.n_rot, c.v_head_dim);
}

void check_routing(const ModelConfig& c) {
  KILN_CHECK(c.expert_groups >= 1 && c.n_experts % c.expert_groups == 0 &&
                 c.expert_groups_used >= 1 && c.expert_groups_used <= c.expert_groups &&
                 c.n_experts_used <= c.expert_groups_used * (c.n_experts / c.expert_groups),
             "invalid expert groups: {} used of {} groups of {} experts, {} experts per token",
             c.expert_groups_used, c.expert_groups, c.n_experts, c.n_experts_used);
  KILN_CHECK(c.n_dense_lead >= 0 && c.n_dense_lead <= c.n_layers, "{} leading dense layers of {}",
             c.n_dense_lead, c.n_layers);
}

const json* find(const json& c, const char* key) {
  auto it = c.find(key);
  return it == c.end() || it->is_null() ? nullptr : &*it;
}

std::optional<double> number(const json& c, const char* key) {
  const json* v = find(c, key);
  if (v == nullptr) return std::nullopt;
  KILN_CHECK(v->is_number(), "config.json: '{}' must be a number", key);
  return v->get<double>();
}

std::optional<int> integer(const json& c, const char* key) {
  const json* v = find(c, key);
  if (v == nullptr) return std::nullopt;
  KILN_CHECK(v->is_number_integer() && v->get<int64_t>() >= 0 && v->get<int64_t>() < (1 << 30),
             "config.json: '{}' must be a non-negative integer", key);
  return v->get<int>();
}

int need_int(const json& c, const char* key) {
  auto v = integer(c, key);
  KILN_CHECK(v.has_value(), "config.json: '{}' must be an integer", key);
  return *v;
}

std::string string_or(const json& c, const char* key, const std::string& fallback) {
  const json* v = find(c, key);
  if (v == nullptr) return fallback;
  KILN_CHECK(v->is_string(), "config.json: '{}' must be a string", key);
  return v->get<std::string>();
}

// transformers 5 writes rope_parameters, transformers 4 rope_theta and rope_scaling.
void read_hf_rope(const json& c, ModelConfig& m) {
  json params = json::object();
  if (const json* p = find(c, "rope_parameters")) params = *p;
  if (const json* s = find(c, "rope_scaling"); s != nullptr && params.empty()) params = *s;
  KILN_CHECK(params.is_object(), "config.json: rope parameters must be an object");
  const double theta = number(params, "rope_theta").value_or(number(c, "rope_theta").value_or(1e4));
  const std::string type = string_or(params, "rope_type", string_or(params, "type", "default"));
  KILN_CHECK(type == "default" || type == "yarn",
             "rope scaling '{}' is not implemented for DeepSeek (kiln implements none and "
             "yarn); refusing to run with wrong positions",
             type);
  if (type == "default") {
    set_rope(m, theta, false, 1, 1, 1, 1, 0);
    return;
  }
  const double factor = number(params, "factor").value_or(1.0);
  const double mscale = number(params, "mscale").value_or(0.0);
  const double mscale_all = number(params, "mscale_all_dim").value_or(0.0);
  // transformers scales the rotated q and k by mscale / mscale_all_dim (or, without both, by
  // yarn_mscale(factor, 1)); DeepSeek's configs make that 1, the only case kiln implements.
  const double magnitude =
      number(params, "attention_factor")
          .value_or(mscale != 0 && mscale_all != 0
                        ? yarn_mscale(factor, mscale) / yarn_mscale(factor, mscale_all)
                        : yarn_mscale(factor, 1.0));
  KILN_CHECK(std::abs(magnitude - 1.0) < 1e-12,
             "YaRN with rotary magnitude {} (mscale {} vs mscale_all_dim {}) is not implemented",
             magnitude, mscale, mscale_all);
  const json* truncate = find(params, "truncate");
  KILN_CHECK(truncate == nullptr || (truncate->is_boolean() && truncate->get<bool>()),
             "YaRN without truncation is not implemented");
  const auto original = number(params, "original_max_position_embeddings");
  KILN_CHECK(original.has_value(), "config.json: YaRN needs 'original_max_position_embeddings'");
  set_rope(m, theta, true, factor, *original, number(params, "beta_fast").value_or(32.0),
           number(params, "beta_slow").value_or(1.0), mscale_all);
}

}  // namespace

std::vector<float> yarn_rope_factors(int n_rot, double theta, double factor,
                                     double original_context, double beta_fast, double beta_slow,
                                     bool truncate) {
  double low = correction_dim(beta_fast, n_rot, theta, original_context);
  double high = correction_dim(beta_slow, n_rot, theta, original_context);
  if (truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(0.0, low);
  high = std::min(static_cast<double>(n_rot - 1), high);
  if (high == low) high += 0.001;  // as transformers: no division by zero
  std::vector<float> out;
  for (int i = 0; i < n_rot / 2; ++i) {
    // ramp 0: the original frequency (extrapolation), 1: divided by factor (interpolation).
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    out.push_back(static_cast<float>(1.0 / (1.0 - ramp + ramp / factor)));
  }
  return out;
}

double yarn_mscale(double factor, double mscale) {
  return factor <= 1 ? 1.0 : 0.1 * mscale * std::log(factor) + 1.0;
}

void read_deepseek2_dims(const GgufFile& file, const std::string& p, ModelConfig& c) {
  c.mla = true;
  c.n_rot = static_cast<int>(file.get_u32(p + "rope.dimension_count"));
  // Files since llama.cpp's absorbed MLA give the latent view in key_length/value_length and
  // the per-head one in *_mla; older files give the per-head one in key_length/value_length.
  const bool latent_view = file.has_key(p + "attention.key_length_mla");
  c.head_dim = static_cast<int>(
      file.get_u32(p + (latent_view ? "attention.key_length_mla" : "attention.key_length")));
  c.v_head_dim = static_cast<int>(
      file.get_u32(p + (latent_view ? "attention.value_length_mla" : "attention.value_length")));
  c.qk_nope_dim = c.head_dim - c.n_rot;
  c.kv_lora_rank = static_cast<int>(file.get_u32(p + "attention.kv_lora_rank"));
  c.q_lora_rank = static_cast<int>(file.try_get_u32(p + "attention.q_lora_rank").value_or(0));
  c.n_kv_heads = c.n_heads;
  check_dims(c);
}

void read_deepseek2_rest(const GgufFile& file, const std::string& p, ModelConfig& c) {
  const std::string scaling = file.try_get_string(p + "rope.scaling.type").value_or("none");
  KILN_CHECK(scaling == "none" || scaling == "yarn",
             "rope scaling '{}' is not implemented for deepseek2 (kiln implements none and "
             "yarn); refusing to run with wrong positions",
             scaling);
  // The converter writes 0.1 * mscale_all_dim as the log multiplier.
  const double log_mul = file.try_get_f32(p + "rope.scaling.yarn_log_multiplier").value_or(0.0f);
  set_rope(c, file.try_get_f32(p + "rope.freq_base").value_or(10000.0f), scaling == "yarn",
           file.try_get_f32(p + "rope.scaling.factor").value_or(1.0f),
           file.try_get_u32(p + "rope.scaling.original_context_length").value_or(0),
           file.try_get_f32(p + "rope.scaling.yarn_beta_fast").value_or(32.0f),
           file.try_get_f32(p + "rope.scaling.yarn_beta_slow").value_or(1.0f), log_mul / 0.1);

  c.n_dense_lead = static_cast<int>(file.try_get_u32(p + "leading_dense_block_count").value_or(0));
  c.n_ff_shared =
      static_cast<int>(file.try_get_u32(p + "expert_shared_count").value_or(0)) * c.n_ff_expert;
  // llama.cpp's expert_gating_func: 1 softmax (the default here), 2 sigmoid.
  const uint32_t gating = file.try_get_u32(p + "expert_gating_func").value_or(1);
  KILN_CHECK(gating == 1 || gating == 2,
             "expert gating function {} is not supported for deepseek2 (softmax or sigmoid)",
             gating);
  c.expert_sigmoid = gating == 2;
  c.expert_groups = static_cast<int>(file.try_get_u32(p + "expert_group_count").value_or(1));
  c.expert_groups_used =
      static_cast<int>(file.try_get_u32(p + "expert_group_used_count").value_or(c.expert_groups));
  const float scale = file.try_get_f32(p + "expert_weights_scale").value_or(0.0f);
  c.expert_weights_scale = scale != 0.0f ? scale : 1.0;  // 0: not written, no scaling
  // DeepSeek renormalizes only when the key says so (norm_topk_prob), unlike Qwen3-MoE.
  c.expert_weights_norm = file.try_get_bool(p + "expert_weights_norm").value_or(false);
  check_routing(c);
}

void read_deepseek_hf(const json& c, bool v3, ModelConfig& m) {
  m.mla = true;
  m.n_rot = need_int(c, "qk_rope_head_dim");
  m.qk_nope_dim = need_int(c, "qk_nope_head_dim");
  m.v_head_dim = need_int(c, "v_head_dim");
  m.kv_lora_rank = need_int(c, "kv_lora_rank");
  m.q_lora_rank = integer(c, "q_lora_rank").value_or(0);
  m.head_dim = m.qk_nope_dim + m.n_rot;
  m.n_kv_heads = m.n_heads;
  m.rope_neox = false;  // DeepSeek rotates adjacent pairs, and the converter keeps its rows
  check_dims(m);
  KILN_CHECK(string_or(c, "hidden_act", "silu") == "silu",
             "config.json: activation '{}' is not supported for DeepSeek",
             string_or(c, "hidden_act", "silu"));
  KILN_CHECK(!c.value("attention_bias", false) && !c.value("mlp_bias", false),
             "config.json: attention_bias / mlp_bias are not supported for DeepSeek");
  read_hf_rope(c, m);

  m.n_experts =
      integer(c, "n_routed_experts")
          .value_or(
              integer(c, "num_local_experts").value_or(integer(c, "num_experts").value_or(0)));
  m.n_experts_used = need_int(c, "num_experts_per_tok");
  m.n_ff_expert = need_int(c, "moe_intermediate_size");
  KILN_CHECK(m.n_experts > 0 && m.n_experts_used > 0 && m.n_experts_used <= m.n_experts &&
                 m.n_ff_expert > 0,
             "invalid experts: {} used of {}, expert width {}", m.n_experts_used, m.n_experts,
             m.n_ff_expert);
  m.n_dense_lead = integer(c, "first_k_dense_replace").value_or(0);
  KILN_CHECK(integer(c, "moe_layer_freq").value_or(1) == 1,
             "config.json: 'moe_layer_freq' other than 1 is not supported");
  m.n_ff_shared = integer(c, "n_shared_experts").value_or(0) * m.n_ff_expert;
  m.expert_weights_scale = number(c, "routed_scaling_factor").value_or(1.0);
  const std::string method = string_or(c, "topk_method", v3 ? "noaux_tc" : "greedy");
  const bool grouped = v3 || method == "group_limited_greedy";
  KILN_CHECK(v3 ? method == "noaux_tc" : (method == "greedy" || grouped),
             "config.json: topk_method '{}' is not supported for {}", method,
             v3 ? "DeepSeek V3" : "DeepSeek V2");
  m.expert_groups = grouped ? integer(c, "n_group").value_or(1) : 1;
  m.expert_groups_used = grouped ? integer(c, "topk_group").value_or(m.expert_groups) : 1;
  // V2's router never renormalizes (transformers ignores norm_topk_prob there); V3's does
  // when norm_topk_prob.
  m.expert_sigmoid = v3;
  m.expert_weights_norm = v3 && c.value("norm_topk_prob", false);
  check_routing(m);
}

}  // namespace kiln::model
