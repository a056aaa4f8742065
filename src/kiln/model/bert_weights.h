// Where a BERT encoder's tensors come from, by their Hugging Face names (BertModel's,
// "encoder.layer.0.attention.self.query.weight"): the safetensors of a model folder, or a GGUF
// file that llama.cpp's converter made from one (architecture "bert"), whose tensor names are
// mapped to these ("blk.0.attn_q.weight").
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "kiln/base/shape.h"
#include "kiln/base/tensor.h"
#include "kiln/model/gguf.h"
#include "kiln/model/safetensors.h"

namespace kiln::model {

class BertWeights {
 public:
  virtual ~BertWeights() = default;
  // The tensor as stored; kiln::Error naming it when absent or not of `shape`.
  virtual Tensor get(const std::string& name, const Shape& shape) const = 0;
  // The same as f32 values, whatever the stored type (float, or a GGUF quantized type).
  std::vector<float> floats(const std::string& name, const Shape& shape) const;
};

// Tensor names may carry a "bert." prefix (BertForMaskedLM and friends) or none (BertModel).
std::unique_ptr<BertWeights> bert_safetensors_weights(
    std::vector<std::shared_ptr<SafetensorsFile>> shards);
std::unique_ptr<BertWeights> bert_gguf_weights(std::shared_ptr<const GgufFile> file);

// The GGUF name llama.cpp's converter gives a BertModel tensor ("" for names it has none for).
std::string bert_gguf_tensor_name(const std::string& hf_name);

}  // namespace kiln::model
