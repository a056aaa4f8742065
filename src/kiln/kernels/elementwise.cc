// Elementwise kernels: the scalar reference implementations, ISA dispatch and the thread split.
#include "kiln/kernels/elementwise.h"

#include <cmath>

#include "kiln/base/error.h"
#include "kiln/kernels/dispatch.h"
#include "kiln/kernels/elementwise_isa.h"

namespace kiln::kernels {
namespace detail {
namespace {

// sqrt(2/pi) and sqrt(2/pi) * 0.044715, as in simd_math.h.
constexpr float kC0 = 0.7978845608028654f;
constexpr float kC1 = 0.035677408136300125f;

float gelu_ref(float x) {
  // 0.5x(1 + tanh(y)) == x / (1 + e^(-2y)); the second form does not cancel for x < 0.
  float y = x * (kC1 * (x * x) + kC0);
  return x / (1.0f + std::exp(-2.0f * y));
}
float silu_ref(float x) { return x / (1.0f + std::exp(-x)); }

void add_ref(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}
void mul_ref(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] * b[i];
}
void scale_ref(const float* x, float factor, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * factor;
}
void gelu_tanh_ref(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gelu_ref(x[i]);
}
void silu_fn_ref(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = silu_ref(x[i]);
}
void softcap_ref(const float* x, float cap, float* out, int64_t n) {
  float inv = 1.0f / cap;
  for (int64_t i = 0; i < n; ++i) out[i] = cap * std::tanh(x[i] * inv);
}
void gelu_mul_ref(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gelu_ref(gate[i]) * up[i];
}
void silu_mul_ref(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = silu_ref(gate[i]) * up[i];
}

void gelu_erf_ref(const float* x, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    out[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * 0.70710678118654752f));
}

}  // namespace

constinit const ElementwiseFns kElementwiseScalar = {add_ref,       mul_ref,      scale_ref,
                                                     gelu_tanh_ref, silu_fn_ref,  softcap_ref,
                                                     gelu_mul_ref,  silu_mul_ref, gelu_erf_ref};

}  // namespace detail

namespace {

// Below this many elements per thread, waking another thread costs more than it saves.
constexpr int64_t kMinPerThread = 4096;

const detail::ElementwiseFns& fns() {
  return detail::pick_isa(detail::kElementwiseScalar, detail::kElementwiseAvx2,
                          detail::kElementwiseAvx512);
}

Range my_range(int64_t n, const ExecContext& ctx) {
  KILN_CHECK(n >= 0, "elementwise: negative length {}", n);
  return detail::share(n, ctx, 16, kMinPerThread);
}

}  // namespace

void add(const float* a, const float* b, float* out, int64_t n, const ExecContext& ctx) {
  Range r = my_range(n, ctx);
  if (r.end > r.begin) fns().add(a + r.begin, b + r.begin, out + r.begin, r.end - r.begin);
}

void add_row_broadcast(const float* a, const float* b_row, float* out, int64_t rows, int64_t cols,
                       const ExecContext& ctx) {
  KILN_CHECK(rows >= 0 && cols >= 0, "add_row_broadcast: bad shape [{}, {}]", rows, cols);
  int64_t min_rows = cols > 0 ? (kMinPerThread + cols - 1) / cols : rows + 1;
  Range r = detail::share(rows, ctx, 1, min_rows);
  const auto& f = fns();
  for (int64_t i = r.begin; i < r.end; ++i) f.add(a + i * cols, b_row, out + i * cols, cols);
}

void mul(const float* a, const float* b, float* out, int64_t n, const ExecContext& ctx) {
  Range r = my_range(n, ctx);
  if (r.end > r.begin) fns().mul(a + r.begin, b + r.begin, out + r.begin, r.end - r.begin);
}

void scale(const float* x, float factor, float* out, int64_t n, const ExecContext& ctx) {
  Range r = my_range(n, ctx);
  if (r.end > r.begin) fns().scale(x + r.begin, factor, out + r.begin, r.end - r.begin);
}

void gelu_tanh(const float* x, float* out, int64_t n, const ExecContext& ctx) {
  Range r = my_range(n, ctx);
  if (r.end > r.begin) fns().gelu_tanh(x + r.begin, out + r.begin, r.end - r.begin);
}

void gelu_erf(const float* x, float* out, int64_t n, const ExecContext& ctx) {
  Range r = my_range(n, ctx);
  if (r.end > r.begin) fns().gelu_erf(x + r.begin, out + r.begin, r.end - r.begin);
}

void silu(const float* x, float* out, int64_t n, const ExecContext& ctx) {
  Range r = my_range(n, ctx);
  if (r.end > r.begin) fns().silu(x + r.begin, out + r.begin, r.end - r.begin);
}

void softcap(const float* x, float cap, float* out, int64_t n, const ExecContext& ctx) {
  KILN_CHECK(cap > 0.0f, "softcap: cap must be > 0, got {}", cap);
  Range r = my_range(n, ctx);
  if (r.end > r.begin) fns().softcap(x + r.begin, cap, out + r.begin, r.end - r.begin);
}

void gelu_mul(const float* gate, const float* up, float* out, int64_t n, const ExecContext& ctx) {
  Range r = my_range(n, ctx);
  if (r.end > r.begin) fns().gelu_mul(gate + r.begin, up + r.begin, out + r.begin, r.end - r.begin);
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n, const ExecContext& ctx) {
  Range r = my_range(n, ctx);
  if (r.end > r.begin) fns().silu_mul(gate + r.begin, up + r.begin, out + r.begin, r.end - r.begin);
}

}  // namespace kiln::kernels
