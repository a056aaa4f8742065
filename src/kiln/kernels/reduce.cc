// Row reductions: scalar references, ISA dispatch and argmax's row split.
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
}  // namespace

constinit const ReduceFns kReduceScalar = {max_row_ref, find_equal_ref};

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

}  // namespace kiln::kernels
