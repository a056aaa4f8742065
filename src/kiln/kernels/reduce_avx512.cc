#include "kiln/kernels/simd_avx512.h"
// (the S header comes first)
#include "kiln/kernels/reduce_simd.h"

namespace kiln::kernels::detail {
constinit const ReduceFns kReduceAvx512 = ReduceSimd<Avx512>::table();
}  // namespace kiln::kernels::detail
