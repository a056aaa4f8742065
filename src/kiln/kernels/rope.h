// Rotary position embedding (RoPE) on rows of heads.
#pragma once
#include <cstdint>
#include <vector>

#include "kiln/kernels/exec_context.h"

namespace kiln::kernels {

// Largest head_dim the RoPE kernels take (per-row cos/sin tables live on the stack).
constexpr int kRopeMaxHeadDim = 1024;

// inv_freq[i] = freq_base^(-2i / n_rot), i < n_rot / 2, computed in double and rounded once to
// float. n_rot is the number of rotated dimensions of a head (head_dim for full rotary).
// Computed at plan time, not per step.
std::vector<float> rope_inv_freq(int n_rot, double freq_base);

// How each head is rotated.
struct RopeSpec {
  int head_dim = 0;
  // The leading n_rot dimensions of each head rotate, the other head_dim - n_rot pass through
  // unchanged (partial rotary, e.g. Phi-4-mini). Even, <= head_dim; 0 means head_dim.
  int n_rot = 0;
  // true: pairs (i, i + n_rot/2) (NeoX / Gemma / Qwen layout); false: pairs (2i, 2i + 1)
  // (GPT-J / Llama GGUF layout).
  bool neox = false;
  const float* inv_freq = nullptr;  // [n_rot/2], from rope_inv_freq(n_rot, freq_base)
  // Per-frequency divisors [n_rot/2] (Llama 3 "llama3" rope scaling: the GGUF's
  // rope_freqs.weight), or null. Frequency i becomes inv_freq[i] / freq_factors[i], formed in
  // double and rounded once to float. They are a weight the graph passes in at run time, so
  // the kernels divide on every call: n_rot/2 divisions per call, nothing next to the rows.
  const float* freq_factors = nullptr;

  int rotated() const { return n_rot == 0 ? head_dim : n_rot; }
};

// Checks the spec (head_dim even and <= kRopeMaxHeadDim, n_rot even and <= head_dim, factors
// positive and finite) and returns the frequencies the rows use, [n_rot/2]: spec.inv_freq
// itself, or inv_freq / freq_factors written into `scratch` (room for kRopeMaxHeadDim/2).
const float* rope_frequencies(const RopeSpec& spec, float* scratch);

// x: [rows, n_heads * head_dim]. For row r, angle_i = positions[r] * freq_i is formed and
// reduced in double precision (so position 30000 is as accurate as position 3), then each pair
// of the first n_rot dimensions of every head is rotated (layout: RopeSpec::neox); the rest of
// the head is copied. out may alias x. Agrees with a float64 reference to ~1e-6 relative to
// the row's magnitude. Threads split the rows.
void rope(const float* x, const int32_t* positions, const RopeSpec& spec, float* out, int64_t rows,
          int n_heads, const ExecContext& ctx);

// Full rotary without frequency factors.
inline void rope(const float* x, const int32_t* positions, const float* inv_freq, float* out,
                 int64_t rows, int n_heads, int head_dim, bool neox, const ExecContext& ctx) {
  rope(x, positions, RopeSpec{head_dim, head_dim, neox, inv_freq, nullptr}, out, rows, n_heads,
       ctx);
}

}  // namespace kiln::kernels
