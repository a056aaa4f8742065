#include "kiln/kernels/simd_avx512.h"
// (the S header comes first)
#include "kiln/kernels/attention_simd.h"

namespace kiln::kernels::detail {
constinit const AttentionFns kAttentionAvx512 = AttentionSimd<Avx512>::table();
}  // namespace kiln::kernels::detail
