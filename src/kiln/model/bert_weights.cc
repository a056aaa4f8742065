#include "kiln/model/bert_weights.h"

#include <regex>
#include <utility>

#include "kiln/base/error.h"
#include "kiln/kernels/dequant.h"

namespace kiln::model {
namespace {

Tensor checked(Tensor t, const std::string& name, const Shape& shape) {
  KILN_CHECK(t.shape() == shape, "BERT tensor '{}' is {}, the config needs {}", name,
             t.shape().str(), shape.str());
  return t;
}

class SafetensorsWeights final : public BertWeights {
 public:
  explicit SafetensorsWeights(std::vector<std::shared_ptr<SafetensorsFile>> shards)
      : shards_(std::move(shards)) {
    // BertModel stores "embeddings.word_embeddings.weight"; the task heads' checkpoints
    // (BertForMaskedLM, ...) put the encoder under "bert.".
    if (find("embeddings.word_embeddings.weight") == nullptr &&
        find("bert.embeddings.word_embeddings.weight") != nullptr)
      prefix_ = "bert.";
  }

  Tensor get(const std::string& name, const Shape& shape) const override {
    const std::string full = prefix_ + name;
    const SafetensorsFile* file = find(full);
    KILN_CHECK(file != nullptr, "BERT checkpoint has no tensor '{}'", full);
    return checked(file->tensor(full), full, shape);
  }

 private:
  const SafetensorsFile* find(const std::string& name) const {
    for (const auto& s : shards_)
      if (s->find(name) != nullptr) return s.get();
    return nullptr;
  }

  std::vector<std::shared_ptr<SafetensorsFile>> shards_;
  std::string prefix_;
};

class GgufWeights final : public BertWeights {
 public:
  explicit GgufWeights(std::shared_ptr<const GgufFile> file) : file_(std::move(file)) {}

  Tensor get(const std::string& name, const Shape& shape) const override {
    const std::string gguf = bert_gguf_tensor_name(name);
    KILN_CHECK(!gguf.empty() && file_->has_tensor(gguf), "'{}' has no tensor '{}' (BERT's '{}')",
               file_->path(), gguf, name);
    return checked(file_->tensor(gguf), gguf, shape);
  }

 private:
  std::shared_ptr<const GgufFile> file_;
};

}  // namespace

std::vector<float> BertWeights::floats(const std::string& name, const Shape& shape) const {
  const Tensor t = get(name, shape);
  std::vector<float> out(static_cast<size_t>(t.numel()));
  const int64_t cols = shape.rank() > 0 ? shape[shape.rank() - 1] : 1;
  const size_t row_bytes = dtype_bytes(t.dtype(), cols);
  for (int64_t r = 0; r < t.numel() / cols; ++r)
    kernels::dequantize_row(t.dtype(), t.data_as<uint8_t>() + r * row_bytes, out.data() + r * cols,
                            cols);
  return out;
}

std::unique_ptr<BertWeights> bert_safetensors_weights(
    std::vector<std::shared_ptr<SafetensorsFile>> shards) {
  return std::make_unique<SafetensorsWeights>(std::move(shards));
}

std::unique_ptr<BertWeights> bert_gguf_weights(std::shared_ptr<const GgufFile> file) {
  return std::make_unique<GgufWeights>(std::move(file));
}

std::string bert_gguf_tensor_name(const std::string& hf_name) {
  static const std::pair<std::string, std::string> kEmbeddings[] = {
      {"embeddings.word_embeddings.weight", "token_embd.weight"},
      {"embeddings.position_embeddings.weight", "position_embd.weight"},
      {"embeddings.token_type_embeddings.weight", "token_types.weight"},
      {"embeddings.LayerNorm.weight", "token_embd_norm.weight"},
      {"embeddings.LayerNorm.bias", "token_embd_norm.bias"},
  };
  for (const auto& [hf, gguf] : kEmbeddings)
    if (hf_name == hf) return gguf;
  static const std::pair<std::string, std::string> kLayer[] = {
      {"attention.self.query", "attn_q"},
      {"attention.self.key", "attn_k"},
      {"attention.self.value", "attn_v"},
      {"attention.output.dense", "attn_output"},
      {"attention.output.LayerNorm", "attn_output_norm"},
      {"intermediate.dense", "ffn_up"},
      {"output.dense", "ffn_down"},
      {"output.LayerNorm", "layer_output_norm"},
  };
  static const std::regex kLayerName(R"(encoder\.layer\.(\d+)\.(.+)\.(weight|bias))");
  std::smatch m;
  if (!std::regex_match(hf_name, m, kLayerName)) return {};
  for (const auto& [hf, gguf] : kLayer)
    if (m[2] == hf) return "blk." + m[1].str() + "." + gguf + "." + m[3].str();
  return {};
}

}  // namespace kiln::model
