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

struct TensorSlice {
  std::string source;  // the tensor stored in the file
  int64_t begin = 0;   // rows [begin, end) of it
  int64_t end = 0;
  // Columns [col_begin, col_end) of those rows; col_end < 0: every column. Only tensor
  // parallelism cuts columns (tensor_parallel.h); a column range is not contiguous, so the
  // weight store copies it, and for a block-quantized type it must start and end on a block.
  int64_t col_begin = 0;
  int64_t col_end = -1;
  bool cuts_columns() const { return col_end >= 0; }
};

// Weight name the forward pass asks for -> the stored rows that hold it (empty for files that
// store every weight separately). A served name may equal its source's name (Phi-3's up rows
// are the second half of the stored `ffn_up`): lookups consult this map before the file.
using FusedTensorMap = std::unordered_map<std::string, TensorSlice>;
FusedTensorMap fused_tensor_slices(const ModelConfig& config);

}  // namespace kiln::model
