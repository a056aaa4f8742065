#include "kiln/model/bert_config.h"

#include <string>

#include "kiln/base/error.h"
#include "kiln/model/gguf.h"

namespace kiln::model {
namespace {

int64_t positive(const nlohmann::json& c, const char* key) {
  KILN_CHECK(c.contains(key) && c[key].is_number_integer() && c[key].get<int64_t>() > 0,
             "BERT config.json: '{}' must be a positive integer", key);
  return c[key].get<int64_t>();
}

}  // namespace

bool is_bert_config(const nlohmann::json& config) {
  return config.is_object() && config.value("model_type", "") == "bert";
}

BertConfig bert_config_from_hf(const nlohmann::json& c) {
  KILN_CHECK(is_bert_config(c), "config.json: model_type '{}' is not a BERT encoder",
             c.is_object() ? c.value("model_type", "") : std::string());
  BertConfig b;
  b.vocab_size = positive(c, "vocab_size");
  b.hidden = positive(c, "hidden_size");
  b.layers = positive(c, "num_hidden_layers");
  b.heads = positive(c, "num_attention_heads");
  b.intermediate = positive(c, "intermediate_size");
  b.max_positions = positive(c, "max_position_embeddings");
  b.type_vocab_size = c.contains("type_vocab_size") ? positive(c, "type_vocab_size") : 2;
  KILN_CHECK(b.hidden % b.heads == 0,
             "BERT config.json: hidden_size {} is not a multiple of num_attention_heads {}",
             b.hidden, b.heads);
  if (c.contains("layer_norm_eps")) {
    KILN_CHECK(c["layer_norm_eps"].is_number() && c["layer_norm_eps"].get<double>() >= 0,
               "BERT config.json: 'layer_norm_eps' must be a number >= 0");
    b.layer_norm_eps = c["layer_norm_eps"].get<float>();
  }
  const std::string act = c.value("hidden_act", "gelu");
  if (act == "gelu") {
    b.activation = BertActivation::kGeluErf;
  } else if (act == "gelu_new" || act == "gelu_pytorch_tanh") {
    b.activation = BertActivation::kGeluTanh;
  } else {
    fail("BERT config.json: hidden_act '{}' is not supported (gelu, gelu_new are)", act);
  }
  const std::string pos = c.value("position_embedding_type", "absolute");
  KILN_CHECK(pos == "absolute",
             "BERT config.json: position_embedding_type '{}' is not supported (absolute is)", pos);
  return b;
}

BertConfig bert_config_from_gguf(const GgufFile& f) {
  KILN_CHECK(f.architecture() == "bert", "'{}' is a {} model, not a BERT encoder", f.path(),
             f.architecture());
  auto positive = [&](const char* key) {
    const int64_t v = f.get_i64(key);
    KILN_CHECK(v > 0, "'{}': {} must be positive, not {}", f.path(), key, v);
    return v;
  };
  BertConfig b;
  b.hidden = positive("bert.embedding_length");
  b.layers = positive("bert.block_count");
  b.heads = positive("bert.attention.head_count");
  b.intermediate = positive("bert.feed_forward_length");
  b.max_positions = positive("bert.context_length");
  b.type_vocab_size = f.has_key("tokenizer.ggml.token_type_count")
                          ? positive("tokenizer.ggml.token_type_count")
                          : 2;
  KILN_CHECK(f.has_tensor("token_embd.weight"), "'{}' has no tensor 'token_embd.weight'", f.path());
  b.vocab_size = f.tensor_info("token_embd.weight").shape[0];
  KILN_CHECK(b.hidden % b.heads == 0,
             "'{}': bert.embedding_length {} is not a multiple of bert.attention.head_count {}",
             f.path(), b.hidden, b.heads);
  if (f.has_key("bert.attention.layer_norm_epsilon"))
    b.layer_norm_eps = f.get_f32("bert.attention.layer_norm_epsilon");
  KILN_CHECK(!f.has_key("bert.attention.causal") || !f.get_bool("bert.attention.causal"),
             "'{}': a causal BERT is not supported", f.path());
  return b;
}

}  // namespace kiln::model
