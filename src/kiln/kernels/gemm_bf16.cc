// The bfloat16 GEMM (gemm_bf16.h): packing, the scalar reference tile, ISA dispatch and the
// split across threads.
#include "kiln/kernels/gemm_bf16.h"

#include <algorithm>
#include <cstring>

#include "kiln/base/error.h"
#include "kiln/base/half.h"
#include "kiln/base/tensor.h"
#include "kiln/kernels/dispatch.h"
#include "kiln/kernels/elementwise_isa.h"
#include "kiln/kernels/gemm_bf16_isa.h"

namespace kiln::kernels {
namespace detail {
namespace {

uint32_t bf16_pair(float even, float odd) {
  return static_cast<uint32_t>(f32_to_bf16(even)) | (static_cast<uint32_t>(f32_to_bf16(odd)) << 16);
}

void pack_row_ref(const float* x, int64_t k, uint32_t* dst) {
  for (int64_t p = 0; p < k / 2; ++p) dst[p] = bf16_pair(x[2 * p], x[2 * p + 1]);
  if (k % 2 != 0) dst[k / 2] = bf16_pair(x[k - 1], 0.0f);
}

// The reference: gemm_bf16.h's steps one output at a time (each product exact in f32, so
// a + b * c rounds once whether or not the compiler contracts it into an FMA).
void tile_ref(const Bf16Tile& t) {
  for (int i = 0; i < t.mt; ++i) {
    const uint32_t* xi = t.x + i * t.x_stride;
    for (int c = 0; c < t.cols; ++c) {
      float acc = 0.0f;
      for (int64_t p = 0; p < t.pairs; ++p) {
        const uint32_t w = t.group[p * kBf16GroupCols + c];
        acc += bf16_to_f32(static_cast<uint16_t>(xi[p] >> 16)) *
               bf16_to_f32(static_cast<uint16_t>(w >> 16));
        acc += bf16_to_f32(static_cast<uint16_t>(xi[p])) * bf16_to_f32(static_cast<uint16_t>(w));
      }
      float* yi = t.y + i * t.y_stride;
      const float out = acc + t.bias[c];
      yi[c] = t.residual != nullptr ? out + t.residual[i * t.y_stride + c] : out;
    }
  }
}

}  // namespace

constinit const GemmBf16Fns kGemmBf16Scalar = {pack_row_ref, tile_ref};

}  // namespace detail

Bf16Weight Bf16Weight::pack(const float* w, int64_t n, int64_t k) {
  KILN_CHECK(n > 0 && k > 0, "gemm_bf16: empty weight [{}, {}]", n, k);
  Bf16Weight out;
  out.n_ = n;
  out.k_ = k;
  const size_t words = static_cast<size_t>(out.groups() * out.pairs() * kBf16GroupCols);
  out.data_ = std::shared_ptr<uint32_t>(static_cast<uint32_t*>(aligned_alloc64(words * 4)),
                                        [](uint32_t* p) { aligned_free(p); });
  std::memset(out.data_.get(), 0, words * 4);
  for (int64_t row = 0; row < n; ++row) {
    uint32_t* g = out.data_.get() + (row / kBf16GroupCols) * out.pairs() * kBf16GroupCols;
    const float* wr = w + row * k;
    for (int64_t p = 0; p < out.pairs(); ++p) {
      const float odd = 2 * p + 1 < k ? wr[2 * p + 1] : 0.0f;
      g[p * kBf16GroupCols + row % kBf16GroupCols] = detail::bf16_pair(wr[2 * p], odd);
    }
  }
  return out;
}

float Bf16Weight::at(int64_t row, int64_t col) const {
  const uint32_t word =
      group(row / kBf16GroupCols)[(col / 2) * kBf16GroupCols + row % kBf16GroupCols];
  return bf16_to_f32(static_cast<uint16_t>(col % 2 == 0 ? word : word >> 16));
}

size_t gemm_bf16_scratch_bytes(const Bf16Weight& w, int64_t m) {
  // The packed activation rows, then one group's worth of zero bias.
  return static_cast<size_t>(m * w.pairs() * 4 + kBf16GroupCols * 4 + 64);
}

void gemm_bf16(const Bf16Weight& w, const float* x, int64_t m, float* y, const float* bias,
               const float* residual, void* scratch, const ExecContext& ctx, Bf16Activation act) {
  using detail::kBf16TileRows;
  KILN_CHECK(act == Bf16Activation::kNone || residual == nullptr,
             "gemm_bf16: an activation with a residual");
  const detail::GemmBf16Fns& fns =
      detail::pick_isa(detail::kGemmBf16Scalar, detail::kGemmBf16Avx2, detail::kGemmBf16Avx512);
  const detail::ElementwiseFns& elementwise = detail::pick_isa(
      detail::kElementwiseScalar, detail::kElementwiseAvx2, detail::kElementwiseAvx512);
  void (*activation)(const float*, float*, int64_t) =
      act == Bf16Activation::kGeluErf    ? elementwise.gelu_erf
      : act == Bf16Activation::kGeluTanh ? elementwise.gelu_tanh
                                         : nullptr;
  const int64_t pairs = w.pairs(), n = w.n(), k = w.k();
  auto* xp = static_cast<uint32_t*>(scratch);
  // The zero bias lies after the activation words (4-byte aligned like them).
  auto* zeros = static_cast<float*>(
      static_cast<void*>(static_cast<uint8_t*>(scratch) + m * pairs * sizeof(uint32_t)));
  const Range rows = split_range(m, ctx.tid, ctx.nth, 1);
  for (int64_t i = rows.begin; i < rows.end; ++i) fns.pack_row(x + i * k, k, xp + i * pairs);
  if (ctx.tid == 0) std::fill_n(zeros, kBf16GroupCols, 0.0f);
  ctx.sync();

  auto run = [&](int64_t g, int64_t row0, int64_t row_end) {
    const int64_t col0 = g * kBf16GroupCols;
    detail::Bf16Tile t{};
    t.group = w.group(g);
    t.x_stride = pairs;
    t.pairs = pairs;
    t.cols = static_cast<int>(std::min<int64_t>(kBf16GroupCols, n - col0));
    t.bias = bias != nullptr ? bias + col0 : zeros;
    t.y_stride = n;
    for (int64_t r = row0; r < row_end; r += kBf16TileRows) {
      t.x = xp + r * pairs;
      t.mt = static_cast<int>(std::min<int64_t>(kBf16TileRows, row_end - r));
      t.residual = residual != nullptr ? residual + r * n + col0 : nullptr;
      t.y = y + r * n + col0;
      fns.tile(t);
      if (activation != nullptr)  // on the tile while it is in L1
        for (int i = 0; i < t.mt; ++i) activation(t.y + i * n, t.y + i * n, t.cols);
    }
  };
  // Columns across threads (each thread reads only its share of the weights, once per tile
  // of rows) while there are enough groups; else rows, in whole tiles.
  if (w.groups() >= ctx.nth) {
    const Range gs = split_range(w.groups(), ctx.tid, ctx.nth, 1);
    for (int64_t g = gs.begin; g < gs.end; ++g) run(g, 0, m);
  } else {
    const Range rs = split_range(m, ctx.tid, ctx.nth, kBf16TileRows);
    for (int64_t g = 0; g < w.groups() && rs.begin < rs.end; ++g) run(g, rs.begin, rs.end);
  }
}

}  // namespace kiln::kernels
