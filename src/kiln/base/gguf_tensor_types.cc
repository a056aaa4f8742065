#include "kiln/base/gguf_tensor_types.h"

#include <fmt/format.h>

namespace kiln {

std::string gguf_tensor_type_name(uint32_t id) {
  if (const GgufTensorType* t = find_gguf_tensor_type(id)) return std::string(t->name);
  return fmt::format("type {}", id);
}

}  // namespace kiln
