// A BERT encoder's config.json (model_type "bert": BertModel, BertForMaskedLM, ...), the
// numbers the encoder needs. Only what kiln computes is accepted: absolute position
// embeddings and a GELU activation; anything else is refused with one line naming the key.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>

namespace kiln::model {

enum class BertActivation { kGeluErf, kGeluTanh };

struct BertConfig {
  int64_t vocab_size = 0;
  int64_t hidden = 0;
  int64_t layers = 0;
  int64_t heads = 0;
  int64_t intermediate = 0;
  int64_t max_positions = 0;
  int64_t type_vocab_size = 0;
  float layer_norm_eps = 1e-12f;
  BertActivation activation = BertActivation::kGeluErf;

  int64_t head_dim() const { return hidden / heads; }
};

// Whether config.json describes a BERT encoder (model_type "bert").
bool is_bert_config(const nlohmann::json& config);

// Throws kiln::Error naming the missing, invalid or unsupported key.
BertConfig bert_config_from_hf(const nlohmann::json& config);

class GgufFile;
// The same from a GGUF file of architecture "bert" (bert.* keys; the vocabulary from the
// embedding table; the erf GELU of the BERT checkpoints llama.cpp's converter reads).
BertConfig bert_config_from_gguf(const GgufFile& file);

}  // namespace kiln::model
