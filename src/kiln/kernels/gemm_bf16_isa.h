// Internal: one ISA's bfloat16 tile kernel (gemm_bf16.h's arithmetic) and its table.
#pragma once
#include <cstdint>

namespace kiln::kernels::detail {

// Rows of activations one tile call covers (the AVX-512 kernel keeps 8 x 32 f32 sums in 16
// registers).
inline constexpr int kBf16TileRows = 8;

// One tile: rows [0, mt) of the activation pairs x (row stride x_stride words, each word the
// bf16 pair (x[2p], x[2p+1])) against one packed group (pairs x 32 words), written to
// y[i * y_stride + c] = (acc + bias[c]) + residual[i * y_stride + c] for c < cols (<= 32).
// bias is never null here (the driver passes zeros); residual may be null.
struct Bf16Tile {
  const uint32_t* group;
  const uint32_t* x;
  int64_t x_stride;
  int64_t pairs;
  int mt;
  int cols;
  const float* bias;
  const float* residual;
  float* y;
  int64_t y_stride;
};

struct GemmBf16Fns {
  // dst[p] = the bf16 pair (x[2p], x[2p+1]) of one row of k floats (x[k] = 0 when k is odd).
  void (*pack_row)(const float* x, int64_t k, uint32_t* dst);
  void (*tile)(const Bf16Tile& t);
};

extern const GemmBf16Fns kGemmBf16Scalar;
extern const GemmBf16Fns kGemmBf16Avx2;
extern const GemmBf16Fns kGemmBf16Avx512;

}  // namespace kiln::kernels::detail
