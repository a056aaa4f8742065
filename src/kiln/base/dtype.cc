#include "kiln/base/dtype.h"

#include "kiln/base/error.h"

namespace kiln {
// The enum's order is the table's: each row names its own type.
static_assert(dtype_info(DType::F32).name == "f32" && dtype_info(DType::F16).name == "f16" &&
              dtype_info(DType::BF16).name == "bf16" && dtype_info(DType::I32).name == "i32" &&
              dtype_info(DType::I8).name == "i8" && dtype_info(DType::Q4_0).name == "q4_0" &&
              dtype_info(DType::Q5_0).name == "q5_0" && dtype_info(DType::Q8_0).name == "q8_0" &&
              dtype_info(DType::Q4_K).name == "q4_k" && dtype_info(DType::Q5_K).name == "q5_k" &&
              dtype_info(DType::Q6_K).name == "q6_k" && dtype_info(DType::Token).name == "token" &&
              dtype_info(DType::Q4_1).name == "q4_1" && dtype_info(DType::Q3_K).name == "q3_k" &&
              dtype_info(DType::Q2_K).name == "q2_k" &&
              dtype_info(DType::IQ4_XS).name == "iq4_xs" &&
              dtype_info(DType::IQ4_NL).name == "iq4_nl" &&
              dtype_info(DType::Q5_1).name == "q5_1" && dtype_info(DType::MXFP4).name == "mxfp4");

std::optional<DType> dtype_from_name(std::string_view name) {
  for (int i = 0; i < kNumDTypes; ++i) {
    if (kDTypeInfos[i].name == name) return static_cast<DType>(i);
  }
  return std::nullopt;
}

std::optional<DType> dtype_from_gguf(uint32_t gguf_type) {
  for (int i = 0; i < kNumDTypes; ++i) {
    if (kDTypeInfos[i].gguf_type == static_cast<int>(gguf_type)) return static_cast<DType>(i);
  }
  return std::nullopt;
}

size_t dtype_bytes(DType t, int64_t n) {
  const DTypeInfo& info = dtype_info(t);
  KILN_CHECK(n % info.block_size == 0, "{} elements is not a whole number of {} blocks of {}", n,
             info.name, info.block_size);
  return static_cast<size_t>(n / info.block_size) * static_cast<size_t>(info.block_bytes);
}

}  // namespace kiln
