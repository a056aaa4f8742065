#include "kiln/kernels/simd_avx2.h"
// (the S header comes first)
#include "kiln/kernels/reduce_simd.h"

namespace kiln::kernels::detail {
constinit const ReduceFns kReduceAvx2 = ReduceSimd<Avx2>::table();
}  // namespace kiln::kernels::detail
