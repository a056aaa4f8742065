#include "kiln/kernels/simd_avx512.h"
// (the S header comes first)
#include "kiln/kernels/norm_simd.h"

namespace kiln::kernels::detail {
constinit const NormFns kNormAvx512 = NormSimd<Avx512>::table();
}  // namespace kiln::kernels::detail
