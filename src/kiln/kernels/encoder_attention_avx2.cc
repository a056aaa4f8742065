#include "kiln/kernels/simd_avx2.h"
// (the S header comes first)
#include "kiln/kernels/encoder_attention_simd.h"

namespace kiln::kernels::detail {
constinit const EncoderAttentionFn kEncoderAttentionAvx2 = EncoderAttentionSimd<Avx2>::run;
}  // namespace kiln::kernels::detail
