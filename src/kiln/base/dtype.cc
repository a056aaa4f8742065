#include "kiln/base/dtype.h"

#include "kiln/base/error.h"

namespace kiln {
namespace {

// ggml_type ids from the GGUF specification.
constexpr DTypeInfo kInfos[kNumDTypes] = {
    {"f32", 1, 4, false, 0},      {"f16", 1, 2, false, 1},      {"bf16", 1, 2, false, 30},
    {"i32", 1, 4, false, 26},     {"i8", 1, 1, false, 24},      {"q4_0", 32, 18, true, 2},
    {"q5_0", 32, 22, true, 6},    {"q8_0", 32, 34, true, 8},    {"q4_k", 256, 144, true, 12},
    {"q5_k", 256, 176, true, 13}, {"q6_k", 256, 210, true, 14}, {"token", 1, 0, false, -1},
};

}  // namespace

const DTypeInfo& dtype_info(DType t) { return kInfos[static_cast<int>(t)]; }

std::optional<DType> dtype_from_name(std::string_view name) {
  for (int i = 0; i < kNumDTypes; ++i) {
    if (kInfos[i].name == name) return static_cast<DType>(i);
  }
  return std::nullopt;
}

std::optional<DType> dtype_from_gguf(uint32_t gguf_type) {
  for (int i = 0; i < kNumDTypes; ++i) {
    if (kInfos[i].gguf_type == static_cast<int>(gguf_type)) return static_cast<DType>(i);
  }
  return std::nullopt;
}

std::string_view gguf_type_name(uint32_t gguf_type) {
  static constexpr std::string_view kNames[] = {
      "f32",     "f16",    "q4_0",    "q4_1",  "type 4", "type 5", "q5_0",  "q5_1",
      "q8_0",    "q8_1",   "q2_k",    "q3_k",  "q4_k",   "q5_k",   "q6_k",  "q8_k",
      "iq2_xxs", "iq2_xs", "iq3_xxs", "iq1_s", "iq4_nl", "iq3_s",  "iq2_s", "iq4_xs",
      "i8",      "i16",    "i32",     "i64",   "f64",    "iq1_m",  "bf16"};
  if (gguf_type < std::size(kNames)) return kNames[gguf_type];
  return "unknown type";
}

size_t dtype_bytes(DType t, int64_t n) {
  const DTypeInfo& info = dtype_info(t);
  KILN_CHECK(n % info.block_size == 0, "{} elements is not a whole number of {} blocks of {}", n,
             info.name, info.block_size);
  return static_cast<size_t>(n / info.block_size) * static_cast<size_t>(info.block_bytes);
}

}  // namespace kiln
