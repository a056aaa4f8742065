// Internal: one ISA's RoPE pieces (the public kernel and the fused qk-norm+rope+kv-write call
// them through this table, so fused and unfused paths run identical machine code).
#pragma once
#include <cstdint>

namespace kiln::kernels::detail {

struct RopeFns {
  // cos/sin of pos * inv_freq[i], i < half, angle in double, results rounded to float.
  void (*cos_sin)(int32_t pos, const float* inv_freq, float* cos_out, float* sin_out, int half);
  // Rotates the first n_rot dimensions of n_heads consecutive heads of x into out with the
  // tables above (n_rot/2 entries) and copies the other head_dim - n_rot. out may alias x.
  void (*rotate_heads)(const float* x, float* out, int n_heads, int head_dim, int n_rot, bool neox,
                       const float* cos_t, const float* sin_t);
};

extern const RopeFns kRopeScalar;
extern const RopeFns kRopeAvx2;
extern const RopeFns kRopeAvx512;

const RopeFns& rope_fns();  // the active ISA's table

// The dimensions of one head past n_rot, which RoPE leaves as they are.
void copy_unrotated(const float* x, float* out, int head_dim, int n_rot);

}  // namespace kiln::kernels::detail
