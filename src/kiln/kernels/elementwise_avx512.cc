#include "kiln/kernels/simd_avx512.h"
// (the S header comes first)
#include "kiln/kernels/elementwise_simd.h"

namespace kiln::kernels::detail {
constinit const ElementwiseFns kElementwiseAvx512 = ElementwiseSimd<Avx512>::table();
}  // namespace kiln::kernels::detail
