// Element types. Quantized types store a row as a sequence of fixed-size blocks; their layouts
// are those of GGUF (see kernels/dequant.h for the block structs).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

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
};
inline constexpr int kNumDTypes = 12;

struct DTypeInfo {
  std::string_view name;  // as printed in text IR: f32, q4_k, ...
  int block_size;         // elements per block (1 for plain types)
  int block_bytes;        // bytes per block
  bool quantized;
  int gguf_type;  // ggml_type id, -1 if GGUF has none
};

const DTypeInfo& dtype_info(DType t);
inline std::string_view dtype_name(DType t) { return dtype_info(t).name; }
std::optional<DType> dtype_from_name(std::string_view name);
std::optional<DType> dtype_from_gguf(uint32_t gguf_type);
// Name of a GGUF tensor type id for error messages, known to kiln or not ("q2_k", "type 99").
std::string_view gguf_type_name(uint32_t gguf_type);

// Bytes that n consecutive elements occupy. n must be a multiple of the block size.
size_t dtype_bytes(DType t, int64_t n);

}  // namespace kiln
