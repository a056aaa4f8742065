// Internal: one ISA's row routines for writing the KV cache, used by kv_write and the fused
// qk-norm+rope+kv-write kernel: f32 -> f16 (round to nearest even) and f32 -> q8 blocks.
#pragma once
#include <cstdint>

namespace kiln::kernels::detail {

struct KvFns {
  void (*to_f16_row)(const float* src, uint16_t* dst, int64_t n);
  // Quantizes one block of n values (as quantize_q8_block_ref, bit for bit); returns its scale.
  float (*to_q8_block)(const float* src, int8_t* dst, int64_t n);
};

extern const KvFns kKvScalar;
extern const KvFns kKvAvx2;
extern const KvFns kKvAvx512;

const KvFns& kv_fns();  // the active ISA's table

}  // namespace kiln::kernels::detail
