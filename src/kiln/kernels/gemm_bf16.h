// y = x * W^T + bias (+ residual) in bfloat16: the sentence encoders' fast precision.
//
// Float checkpoints (BERT, all-MiniLM) are compute-bound at the batch sizes of an embedding
// request (every text's tokens at once), and the f32 matmul already runs near the vector
// units' f32 FMA peak. AVX512_BF16's vdpbf16ps does two multiply-adds per f32 lane in the time
// of one FMA, so rounding both operands to bfloat16 doubles the arithmetic rate. Measured on
// all-MiniLM-L6-v2 (docs/embeddings.md) the rounding moves sentence embeddings by a cosine of
// about 3e-5 at worst, inside the 1e-4 its users accept; the decoders never use this path (their
// contract is matmul.h's).
//
// THE ARITHMETIC: weights and activations are rounded to bfloat16 (nearest even); each output
// starts at 0 and takes, for each input pair (2p, 2p + 1) in order, acc += x[2p+1] * w[2p+1],
// then acc += x[2p] * w[2p] (each product is exact in f32, each sum rounded: what vdpbf16ps
// does, odd element first); then y = (acc + bias) + residual. Every output sees only its own
// weight row and activation row in this order, so results do not depend on the batch, the
// thread split or the tile. The AVX2 and scalar tiers emulate the same steps with f32 FMAs;
// they differ from vdpbf16ps only where it flushes subnormal bf16 inputs or sums to zero.
//
// Like matmul(), gemm_bf16 is called on every thread of a group with the same arguments and
// returns without a final barrier.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>

#include "kiln/kernels/exec_context.h"

namespace kiln::kernels {

// Output columns per packed group: the tile kernels' width (two AVX-512 registers of f32).
inline constexpr int kBf16GroupCols = 32;

// A [N, K] float weight in bfloat16, as the tile kernels read it: for each group of 32 output
// columns (the last zero-padded), for each input pair p, the 32 columns' (w[2p], w[2p+1])
// pairs, one 32-bit word per column (K is padded to even with a zero input).
class Bf16Weight {
 public:
  Bf16Weight() = default;
  // w: [n, k] row-major f32 (concatenate several weights' rows first for a merged QKV).
  static Bf16Weight pack(const float* w, int64_t n, int64_t k);

  int64_t n() const { return n_; }
  int64_t k() const { return k_; }
  int64_t pairs() const { return (k_ + 1) / 2; }
  int64_t groups() const { return (n_ + kBf16GroupCols - 1) / kBf16GroupCols; }
  const uint32_t* group(int64_t g) const { return data_.get() + g * pairs() * kBf16GroupCols; }
  // w[row][col] as stored (bf16 widened to f32), for tests.
  float at(int64_t row, int64_t col) const;

 private:
  int64_t n_ = 0, k_ = 0;
  std::shared_ptr<uint32_t> data_;
};

// An activation applied to y after the bias (the encoders' FFN up projection), by the same
// per-ISA function elementwise.h's gelu_erf / gelu_tanh use: the fused result equals the
// unfused one bit for bit, without another pass over the [m, N] output.
enum class Bf16Activation { kNone, kGeluErf, kGeluTanh };

// Scratch gemm_bf16 needs for m rows of activations (shared by the group, 64-byte aligned).
size_t gemm_bf16_scratch_bytes(const Bf16Weight& w, int64_t m);

// y[m, N] = act(bf16(x[m, K]) * bf16(W)^T + bias[N]) (+ residual[m, N] when non-null; it may
// alias y; not with an activation). bias may be null (zero). x must not overlap y.
void gemm_bf16(const Bf16Weight& w, const float* x, int64_t m, float* y, const float* bias,
               const float* residual, void* scratch, const ExecContext& ctx,
               Bf16Activation act = Bf16Activation::kNone);

}  // namespace kiln::kernels
