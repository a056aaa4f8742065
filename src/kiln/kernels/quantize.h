// Float rows to GGUF's Q8_0 and Q4_0 blocks (dequant.h has the layouts), for `--quantize`,
// which packs a Hugging Face checkpoint's matmul weights at load. The rules are the
// formats' reference ones, so a quantized row dequantizes as a GGUF file of that type would:
//  - Q8_0: d = max|x| / 127, q = round(x / d)
//  - Q4_0: d = m / -8 where m is the element of largest magnitude (with its sign), and
//          code = min(15, trunc(x / d + 8.5))
#pragma once
#include <cstdint>

#include "kiln/base/dtype.h"

namespace kiln::kernels {

// n must be a multiple of 32; t is Q8_0 or Q4_0 (throws otherwise).
void quantize_row(DType t, const float* src, void* dst, int64_t n);

}  // namespace kiln::kernels
