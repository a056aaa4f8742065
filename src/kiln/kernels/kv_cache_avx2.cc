#include "kiln/kernels/simd_avx2.h"
// (the S header comes first)
#include "kiln/kernels/kv_cache_simd.h"

namespace kiln::kernels::detail {
constinit const KvFns kKvAvx2 = KvSimd<Avx2>::table();
}  // namespace kiln::kernels::detail
