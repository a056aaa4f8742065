#include "kiln/kernels/simd_avx2.h"
// (the S header comes first)
#include "kiln/kernels/elementwise_simd.h"

namespace kiln::kernels::detail {
constinit const ElementwiseFns kElementwiseAvx2 = ElementwiseSimd<Avx2>::table();
}  // namespace kiln::kernels::detail
