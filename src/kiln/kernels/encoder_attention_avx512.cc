#include "kiln/kernels/simd_avx512.h"
// (the S header comes first)
#include "kiln/kernels/encoder_attention_simd.h"

namespace kiln::kernels::detail {
constinit const EncoderAttentionFn kEncoderAttentionAvx512 = EncoderAttentionSimd<Avx512>::run;
}  // namespace kiln::kernels::detail
