// Internal: one ISA's f32 -> f16 row conversion (round to nearest even) used by kv_write and
// the fused qk-norm+rope+kv-write kernel.
#pragma once
#include <cstdint>

namespace kiln::kernels::detail {

struct KvFns {
  void (*to_f16_row)(const float* src, uint16_t* dst, int64_t n);
};

extern const KvFns kKvScalar;
extern const KvFns kKvAvx2;
extern const KvFns kKvAvx512;

const KvFns& kv_fns();  // the active ISA's table

}  // namespace kiln::kernels::detail
