#include "kiln/kernels/simd_avx2.h"
// (the S header comes first)
#include "kiln/kernels/rope_simd.h"

namespace kiln::kernels::detail {
constinit const RopeFns kRopeAvx2 = RopeSimd<Avx2>::table();
}  // namespace kiln::kernels::detail
