// Element types. Quantized types store a row as a sequence of fixed-size blocks; their layouts
// are those of GGUF (see kernels/dequant.h for the block structs), and every type GGUF has takes
// its name and block geometry from the GGUF table (gguf_tensor_types.h).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "kiln/base/gguf_tensor_types.h"

namespace kiln {

enum class DType : uint8_t {
  F32,
  F16,
  BF16,
  I32,
  I8,
  Q4_0,
  Q5_0,
  Q8_0,
  Q4_K,
  Q5_K,
  Q6_K,
  Token,  // the effect token of mutating graph ops: no storage
  // Types added later follow Token, so the ids above (which packed-weight cache files store)
  // keep their values.
  Q4_1,
  Q3_K,
  Q2_K,
  IQ4_XS,
  IQ4_NL,
  Q5_1,
  MXFP4,
};
inline constexpr int kNumDTypes = 19;

struct DTypeInfo {
  std::string_view name;  // as printed in text IR: f32, q4_k, ...
  int block_size;         // elements per block (1 for plain types)
  int block_bytes;        // bytes per block
  bool quantized;
  int gguf_type;  // ggml_type id, -1 if GGUF has none
};

namespace detail {
// The row of a type GGUF has: name and geometry from kGgufTensorTypes (a missing id fails to
// compile).
constexpr DTypeInfo gguf_dtype(uint32_t id, bool quantized) {
  const GgufTensorType& g = *find_gguf_tensor_type(id);
  return {g.name, g.block_size, g.block_bytes, quantized, static_cast<int>(id)};
}
}  // namespace detail

// Indexed by DType.
inline constexpr DTypeInfo kDTypeInfos[kNumDTypes] = {
    detail::gguf_dtype(0, false),  detail::gguf_dtype(1, false),  detail::gguf_dtype(30, false),
    detail::gguf_dtype(26, false), detail::gguf_dtype(24, false), detail::gguf_dtype(2, true),
    detail::gguf_dtype(6, true),   detail::gguf_dtype(8, true),   detail::gguf_dtype(12, true),
    detail::gguf_dtype(13, true),  detail::gguf_dtype(14, true),  {"token", 1, 0, false, -1},
    detail::gguf_dtype(3, true),   detail::gguf_dtype(11, true),  detail::gguf_dtype(10, true),
    detail::gguf_dtype(23, true),  detail::gguf_dtype(20, true),  detail::gguf_dtype(7, true),
    detail::gguf_dtype(39, true),
};

constexpr const DTypeInfo& dtype_info(DType t) { return kDTypeInfos[static_cast<int>(t)]; }
constexpr std::string_view dtype_name(DType t) { return dtype_info(t).name; }
std::optional<DType> dtype_from_name(std::string_view name);
std::optional<DType> dtype_from_gguf(uint32_t gguf_type);

// Bytes that n consecutive elements occupy. n must be a multiple of the block size.
size_t dtype_bytes(DType t, int64_t n);

}  // namespace kiln
