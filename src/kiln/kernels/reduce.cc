// Row reductions: scalar references, ISA dispatch, argmax's row split, top-k's heap.
#include "kiln/kernels/reduce.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kiln/base/error.h"
#include "kiln/kernels/dispatch.h"
#include "kiln/kernels/reduce_isa.h"

namespace kiln::kernels {
namespace detail {
namespace {

float max_row_ref(const float* x, int64_t n) {
  float m = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; ++i)
    if (x[i] > m) m = x[i];
  return m;
}
int64_t find_equal_ref(const float* x, int64_t n, float value) {
  for (int64_t i = 0; i < n; ++i)
    if (x[i] == value) return i;
  return n;
}
int64_t find_greater_ref(const float* x, int64_t n, float thr) {
  for (int64_t i = 0; i < n; ++i)
    if (x[i] > thr) return i;
  return n;
}
float exp_shift_sum_ref(float* x, int64_t n, float m) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - m);
    sum += x[i];
  }
  return static_cast<float>(sum);
}
void scale_ref(float* x, int64_t n, float factor) {
  for (int64_t i = 0; i < n; ++i) x[i] *= factor;
}

}  // namespace

constinit const ReduceFns kReduceScalar = {max_row_ref, find_equal_ref, find_greater_ref,
                                           exp_shift_sum_ref, scale_ref};

}  // namespace detail

namespace {

const detail::ReduceFns& fns() {
  return detail::pick_isa(detail::kReduceScalar, detail::kReduceAvx2, detail::kReduceAvx512);
}

}  // namespace

void argmax_rows(const float* x, int64_t rows, int64_t cols, int32_t* out, const ExecContext& ctx) {
  KILN_CHECK(rows >= 0 && cols > 0 && cols <= std::numeric_limits<int32_t>::max(),
             "argmax_rows: bad shape [{}, {}]", rows, cols);
  const auto& f = fns();
  Range r = detail::share(rows, ctx, 1, (16384 + cols - 1) / cols);
  for (int64_t i = r.begin; i < r.end; ++i) {
    const float* row = x + i * cols;
    // Two passes (max, then its first occurrence) give "ties to the lowest index, NaN never
    // wins" exactly; the second pass usually stops early and the row is still in cache.
    float m = f.max_row(row, cols);
    int64_t idx = f.find_equal(row, cols, m);
    out[i] = static_cast<int32_t>(idx < cols ? idx : 0);  // all NaN: 0
  }
}

void softmax_inplace(float* x, int64_t n) {
  KILN_CHECK(n >= 1, "softmax: empty row");
  const auto& f = fns();
  float m = f.max_row(x, n);
  KILN_CHECK(m > -std::numeric_limits<float>::infinity() && std::isfinite(m),
             "softmax: no finite maximum (all entries -inf or NaN, or +inf present)");
  float sum = f.exp_shift_sum(x, n, m);
  f.scale(x, n, 1.0f / sum);
}

void top_k(const float* x, int64_t n, int64_t k, int32_t* idx_out) {
  KILN_CHECK(n >= 1 && n <= std::numeric_limits<int32_t>::max(), "top_k: bad length {}", n);
  KILN_CHECK(k >= 1 && k <= n, "top_k: k={} must be in [1, {}]", k, n);
  const auto& f = fns();
  auto key = [x](int32_t i) {
    float v = x[i];
    return std::isnan(v) ? -std::numeric_limits<float>::infinity() : v;
  };
  // "a ranks above b": larger value, then lower index.
  auto above = [&key](int32_t a, int32_t b) {
    float va = key(a), vb = key(b);
    return va > vb || (va == vb && a < b);
  };
  // A heap with the lowest-ranked entry on top (std heaps put the comparator's max on top).
  int32_t* heap = idx_out;
  for (int64_t i = 0; i < k; ++i) heap[i] = static_cast<int32_t>(i);
  std::make_heap(heap, heap + k, above);
  // A later index only enters by being strictly greater than the lowest kept value: on a tie
  // the kept entry has the lower index and wins. NaN and -inf never pass the compare.
  int64_t i = k;
  while (i < n) {
    float thr = key(heap[0]);
    i += f.find_greater(x + i, n - i, thr);
    if (i >= n) break;
    std::pop_heap(heap, heap + k, above);
    heap[k - 1] = static_cast<int32_t>(i);
    std::push_heap(heap, heap + k, above);
    ++i;
  }
  std::sort(heap, heap + k, above);
}

}  // namespace kiln::kernels
