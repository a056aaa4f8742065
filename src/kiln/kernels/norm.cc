// RMS norm and LayerNorm: the scalar reference rows, ISA dispatch and the row split across threads.
#include "kiln/kernels/norm.h"

#include <cmath>

#include "kiln/base/error.h"
#include "kiln/kernels/dispatch.h"
#include "kiln/kernels/elementwise_isa.h"
#include "kiln/kernels/norm_isa.h"

namespace kiln::kernels {
namespace detail {
namespace {

void rms_norm_row_ref(const float* x, const float* w, float* out, int64_t n, float eps) {
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(x[i] * inv) * w[i];
}

void layer_norm_row_ref(const float* x, const float* w, const float* b, float* out, int64_t n,
                        float eps) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const double mean = sum / static_cast<double>(n);
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += (x[i] - mean) * (x[i] - mean);
  const double inv = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>((x[i] - mean) * inv * w[i] + b[i]);
}

}  // namespace

constinit const NormFns kNormScalar = {rms_norm_row_ref, layer_norm_row_ref};

const NormFns& norm_fns() { return pick_isa(kNormScalar, kNormAvx2, kNormAvx512); }

}  // namespace detail

namespace {

Range row_share(int64_t rows, int64_t cols, const ExecContext& ctx) {
  // About 4096 floats per thread at least, or the wake-up costs more than the work.
  int64_t min_rows = cols > 0 ? (4096 + cols - 1) / cols : rows + 1;
  return detail::share(rows, ctx, 1, min_rows);
}

}  // namespace

void rms_norm(const float* x, const float* w, float* out, int64_t rows, int64_t cols, float eps,
              const ExecContext& ctx) {
  KILN_CHECK(rows >= 0 && cols > 0, "rms_norm: bad shape [{}, {}]", rows, cols);
  KILN_CHECK(eps >= 0.0f, "rms_norm: eps must be >= 0, got {}", eps);
  const auto& f = detail::norm_fns();
  Range r = row_share(rows, cols, ctx);
  for (int64_t i = r.begin; i < r.end; ++i)
    f.rms_norm_row(x + i * cols, w, out + i * cols, cols, eps);
}

void add_rms_norm(const float* a, const float* b, const float* w, float* sum_out, float* norm_out,
                  int64_t rows, int64_t cols, float eps, const ExecContext& ctx) {
  KILN_CHECK(rows >= 0 && cols > 0, "add_rms_norm: bad shape [{}, {}]", rows, cols);
  KILN_CHECK(eps >= 0.0f, "add_rms_norm: eps must be >= 0, got {}", eps);
  const auto& norm = detail::norm_fns();
  const auto& ew = detail::pick_isa(detail::kElementwiseScalar, detail::kElementwiseAvx2,
                                    detail::kElementwiseAvx512);
  Range r = row_share(rows, cols, ctx);
  for (int64_t i = r.begin; i < r.end; ++i) {
    float* s = sum_out + i * cols;
    ew.add(a + i * cols, b + i * cols, s, cols);
    norm.rms_norm_row(s, w, norm_out + i * cols, cols, eps);
  }
}

void layer_norm(const float* x, const float* w, const float* b, float* out, int64_t rows,
                int64_t cols, float eps, const ExecContext& ctx) {
  KILN_CHECK(rows >= 0 && cols > 0, "layer_norm: bad shape [{}, {}]", rows, cols);
  KILN_CHECK(eps >= 0.0f, "layer_norm: eps must be >= 0, got {}", eps);
  const auto& f = detail::norm_fns();
  Range r = row_share(rows, cols, ctx);
  for (int64_t i = r.begin; i < r.end; ++i)
    f.layer_norm_row(x + i * cols, w, b, out + i * cols, cols, eps);
}

}  // namespace kiln::kernels
