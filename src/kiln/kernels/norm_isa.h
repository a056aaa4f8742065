// Internal: one ISA's per-row RMS norm and LayerNorm (the public kernels and the fused qk-norm
// kernel call it through this table, so fused and unfused paths run identical machine code).
#pragma once
#include <cstdint>

namespace kiln::kernels::detail {

struct NormFns {
  // out may alias x.
  void (*rms_norm_row)(const float* x, const float* w, float* out, int64_t cols, float eps);
  // LayerNorm with a bias (BERT). out may alias x.
  void (*layer_norm_row)(const float* x, const float* w, const float* b, float* out, int64_t cols,
                         float eps);
};

extern const NormFns kNormScalar;
extern const NormFns kNormAvx2;
extern const NormFns kNormAvx512;

const NormFns& norm_fns();  // the active ISA's table

}  // namespace kiln::kernels::detail
