#include "kiln/kernels/quantize.h"

#include <algorithm>
#include <cmath>

#include "kiln/base/error.h"
#include "kiln/base/half.h"
#include "kiln/kernels/dequant.h"

namespace kiln::kernels {
namespace {

void quantize_q8_0(const float* x, BlockQ8_0& b) {
  float amax = 0;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::abs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  b.d = f32_to_f16(d);
  for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>(std::lround(x[j] * id));
}

void quantize_q4_0(const float* x, BlockQ4_0& b) {
  float amax = 0, max = 0;
  for (int j = 0; j < 32; ++j) {
    if (std::abs(x[j]) > amax) {
      amax = std::abs(x[j]);
      max = x[j];
    }
  }
  const float d = max / -8.0f;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  b.d = f32_to_f16(d);
  auto code = [&](float v) {
    return static_cast<uint8_t>(std::min(15, static_cast<int>(v * id + 8.5f)));
  };
  for (int j = 0; j < 16; ++j) b.qs[j] = code(x[j]) | static_cast<uint8_t>(code(x[j + 16]) << 4);
}

}  // namespace

void quantize_row(DType t, const float* src, void* dst, int64_t n) {
  KILN_CHECK(n % 32 == 0, "cannot quantize a row of {} elements to {} (blocks of 32)", n,
             dtype_name(t));
  if (t == DType::Q8_0) {
    auto* blocks = static_cast<BlockQ8_0*>(dst);
    for (int64_t i = 0; i < n / 32; ++i) quantize_q8_0(src + 32 * i, blocks[i]);
  } else if (t == DType::Q4_0) {
    auto* blocks = static_cast<BlockQ4_0*>(dst);
    for (int64_t i = 0; i < n / 32; ++i) quantize_q4_0(src + 32 * i, blocks[i]);
  } else {
    fail("quantizing to {} is not supported (q8_0, q4_0)", dtype_name(t));
  }
}

}  // namespace kiln::kernels
