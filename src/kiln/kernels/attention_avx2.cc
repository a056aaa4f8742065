#include "kiln/kernels/simd_avx2.h"
// (the S header comes first)
#include "kiln/kernels/attention_simd.h"

namespace kiln::kernels::detail {
constinit const AttentionFns kAttentionAvx2 = AttentionSimd<Avx2>::table();
}  // namespace kiln::kernels::detail
