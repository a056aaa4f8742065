#include "kiln/model/model_config.h"

#include <cmath>

#include "kiln/base/error.h"
#include "kiln/model/gguf.h"

namespace kiln::model {
namespace {

bool is_llama_family(const std::string& arch) {
  return arch == "llama" || arch == "mistral" || arch == "qwen2" || arch == "qwen3";
}

}  // namespace

ModelConfig read_model_config(const GgufFile& file) {
  ModelConfig c;
  c.arch = file.architecture();
  KILN_CHECK(c.arch == "gemma3" || is_llama_family(c.arch),
             "unsupported architecture '{}' (kiln supports gemma3, llama, mistral, qwen2, qwen3)",
             c.arch);
  const std::string p = c.arch + ".";
  c.n_layers = static_cast<int>(file.get_u32(p + "block_count"));
  c.n_embd = static_cast<int>(file.get_u32(p + "embedding_length"));
  c.n_ff = static_cast<int>(file.get_u32(p + "feed_forward_length"));
  c.n_heads = static_cast<int>(file.get_u32(p + "attention.head_count"));
  c.n_kv_heads =
      static_cast<int>(file.try_get_u32(p + "attention.head_count_kv").value_or(c.n_heads));
  c.context_length = file.get_u32(p + "context_length");
  c.rms_eps = file.get_f32(p + "attention.layer_norm_rms_epsilon");
  KILN_CHECK(c.n_layers > 0 && c.n_embd > 0 && c.n_ff > 0 && c.n_heads > 0 && c.n_kv_heads > 0,
             "model dimensions must be positive");
  KILN_CHECK(c.n_heads % c.n_kv_heads == 0, "head_count {} is not a multiple of head_count_kv {}",
             c.n_heads, c.n_kv_heads);
  c.head_dim =
      static_cast<int>(file.try_get_u32(p + "attention.key_length").value_or(c.n_embd / c.n_heads));
  uint32_t value_length = file.try_get_u32(p + "attention.value_length").value_or(c.head_dim);
  KILN_CHECK(static_cast<int>(value_length) == c.head_dim,
             "key_length {} != value_length {} is not supported", c.head_dim, value_length);
  KILN_CHECK(c.head_dim > 0 && c.head_dim % 2 == 0, "head_dim {} must be even", c.head_dim);

  auto scaling = file.try_get_string(p + "rope.scaling.type");
  KILN_CHECK(!scaling || *scaling == "none",
             "rope scaling '{}' is not implemented; refusing to run with wrong positions",
             *scaling);
  double rope_base = file.try_get_f32(p + "rope.freq_base").value_or(10000.0f);

  c.attention_scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  c.final_logit_softcap = file.try_get_f32(p + "final_logit_softcapping").value_or(0.0f);
  c.tied_output = !file.has_tensor("output.weight");
  KILN_CHECK(file.has_tensor("token_embd.weight"), "missing tensor 'token_embd.weight'");
  c.vocab = file.tensor_info("token_embd.weight").shape[0];

  c.layers.resize(c.n_layers);
  if (c.arch == "gemma3") {
    c.rope_neox = true;
    c.qk_norm = true;
    c.post_norms = true;
    c.scale_embeddings = true;
    c.activation = Activation::GeluTanh;
    int window = static_cast<int>(file.try_get_u32(p + "attention.sliding_window").value_or(0));
    int pattern =
        static_cast<int>(file.try_get_u32(p + "attention.sliding_window_pattern").value_or(6));
    double swa_base = file.try_get_f32(p + "rope.freq_base_swa").value_or(10000.0f);
    for (int il = 0; il < c.n_layers; ++il) {
      // Layer il is global when (il + 1) % pattern == 0 (layers 5, 11, 17 of 18).
      bool global = pattern <= 0 || window <= 0 || (il + 1) % pattern == 0;
      c.layers[il] = {!global, global ? 0 : window, global ? rope_base : swa_base};
    }
  } else {
    c.rope_neox = c.arch == "qwen2" || c.arch == "qwen3";
    c.qkv_bias = c.arch == "qwen2";
    c.qk_norm = c.arch == "qwen3";
    c.activation = Activation::Silu;
    for (auto& layer : c.layers) layer = {false, 0, rope_base};
  }
  return c;
}

}  // namespace kiln::model
