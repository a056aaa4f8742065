// AVX2 tier: not yet vectorized; it runs the scalar reference kernels (same results).
#include "kiln/kernels/matmul_kernels.h"

namespace kiln::kernels {

TileFn tile_fn_avx2(DType t) { return tile_fn_scalar(t); }

void quantize_row_avx2(const float* x, int64_t k, int8_t* q, float* d, int32_t* s16, int32_t* s32,
                       float* ds) {
  quantize_row_scalar(x, k, q, d, s16, s32, ds);
}

}  // namespace kiln::kernels
