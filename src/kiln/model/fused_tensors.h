// Some converters store tensors fused that kiln's forward pass reads as separate weights: Phi-3
// keeps Q, K and V in one `attn_qkv` tensor and the FFN's gate and up rows in one `ffn_up`
// tensor of 2 * n_ff rows. Rather than teach the forward pass each layout, the weight store
// serves the separate names as row ranges of the stored tensor: a row range of a GGUF matrix
// (rows = output features) is contiguous in every tensor type, so the slices cost nothing.
#pragma once
#include <cstdint>
#include <string>
#include <unordered_map>

#include "kiln/model/model_config.h"

namespace kiln::model {

struct TensorRows {
  std::string source;  // the tensor stored in the file
  int64_t begin = 0;   // rows [begin, end) of it
  int64_t end = 0;
};

// Weight name the forward pass asks for -> the stored rows that hold it (empty for files that
// store every weight separately). A served name may equal its source's name (Phi-3's up rows
// are the second half of the stored `ffn_up`): lookups consult this map before the file.
using FusedTensorMap = std::unordered_map<std::string, TensorRows>;
FusedTensorMap fused_tensor_slices(const ModelConfig& config);

}  // namespace kiln::model
