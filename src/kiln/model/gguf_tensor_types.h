// The tensor types a GGUF file can hold (ggml_type ids), kiln-supported or not. The reader needs
// every type's block geometry to bounds-check a file's tensor data even when kiln cannot compute
// with that type: a q2_k tensor still occupies bytes that must not overlap its neighbours.
#pragma once
#include <cstdint>
#include <optional>
#include <string_view>

#include "kiln/base/dtype.h"

namespace kiln::model {

struct GgufTensorType {
  uint32_t id;            // ggml_type id as stored in the file
  std::string_view name;  // "q4_k", "iq2_xs", ...
  int64_t block_size;     // elements per block
  int64_t block_bytes;    // bytes per block
};

// The type with this id, or nullopt when the id is not a ggml type this reader knows (a file
// written by a newer ggml, or corrupt).
std::optional<GgufTensorType> gguf_tensor_type(uint32_t id);
// "q2_k", or "type 99" for an unknown id.
std::string gguf_tensor_type_name(uint32_t id);
// The kiln dtype of a GGUF tensor type, nullopt when kiln has none.
std::optional<DType> gguf_tensor_dtype(uint32_t id);

}  // namespace kiln::model
