// Scalar f16/bf16 <-> f32 conversions (reference paths; vector kernels use F16C/AVX512_BF16).
#pragma once
#include <cstdint>
#include <cstring>

namespace kiln {

float f16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);  // round to nearest even

inline float bf16_to_f32(uint16_t b) {
  uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t f32_to_bf16(float f) {  // round to nearest even; NaN stays NaN
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffff) > 0x7f800000) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fff + ((bits >> 16) & 1);
  return static_cast<uint16_t>(bits >> 16);
}

}  // namespace kiln
