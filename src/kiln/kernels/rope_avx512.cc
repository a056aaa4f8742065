#include "kiln/kernels/simd_avx512.h"
// (the S header comes first)
#include "kiln/kernels/rope_simd.h"

namespace kiln::kernels::detail {
constinit const RopeFns kRopeAvx512 = RopeSimd<Avx512>::table();
}  // namespace kiln::kernels::detail
