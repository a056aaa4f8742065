#include "kiln/kernels/simd_avx512.h"
// (the S header comes first)
#include "kiln/kernels/kv_cache_simd.h"

namespace kiln::kernels::detail {
constinit const KvFns kKvAvx512 = KvSimd<Avx512>::table();
}  // namespace kiln::kernels::detail
