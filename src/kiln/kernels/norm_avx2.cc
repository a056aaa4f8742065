#include "kiln/kernels/simd_avx2.h"
// (the S header comes first)
#include "kiln/kernels/norm_simd.h"

namespace kiln::kernels::detail {
constinit const NormFns kNormAvx2 = NormSimd<Avx2>::table();
}  // namespace kiln::kernels::detail
