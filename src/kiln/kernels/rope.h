// Rotary position embedding (RoPE) on rows of heads.
#pragma once
#include <cstdint>
#include <vector>

#include "kiln/kernels/exec_context.h"

namespace kiln::kernels {

// Largest head_dim the RoPE kernels take (per-row cos/sin tables live on the stack).
constexpr int kRopeMaxHeadDim = 1024;

// inv_freq[i] = freq_base^(-2i / head_dim), i < head_dim / 2, computed in double and rounded
// once to float. Computed at plan time, not per step.
std::vector<float> rope_inv_freq(int head_dim, double freq_base);

// x: [rows, n_heads * head_dim]. For row r, angle_i = positions[r] * inv_freq[i] is formed and
// reduced in double precision (so position 30000 is as accurate as position 3), then each pair
// is rotated: neox=true pairs (i, i + head_dim/2) (NeoX / Gemma / Qwen layout), neox=false
// pairs (2i, 2i + 1) (GPT-J / Llama GGUF layout). out may alias x. Agrees with a float64
// reference to ~1e-6 relative to the row's magnitude. Threads split the rows.
void rope(const float* x, const int32_t* positions, const float* inv_freq, float* out, int64_t rows,
          int n_heads, int head_dim, bool neox, const ExecContext& ctx);

}  // namespace kiln::kernels
