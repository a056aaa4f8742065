// kv_write: validation, the scalar reference conversion, ISA dispatch and the row split.
#include "kiln/kernels/kv_cache.h"

#include "kiln/base/error.h"
#include "kiln/base/half.h"
#include "kiln/kernels/dispatch.h"
#include "kiln/kernels/kv_cache_isa.h"

namespace kiln::kernels {
namespace detail {
namespace {

void to_f16_row_ref(const float* src, uint16_t* dst, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] = f32_to_f16(src[i]);
}

}  // namespace

constinit const KvFns kKvScalar = {to_f16_row_ref};

const KvFns& kv_fns() { return pick_isa(kKvScalar, kKvAvx2, kKvAvx512); }

}  // namespace detail

void check_kv_view(const KvLayerView& view) {
  KILN_CHECK(view.k != nullptr && view.v != nullptr, "kv cache view: null K or V");
  KILN_CHECK(view.n_pages > 0 && view.page_size > 0 && view.n_kv_heads > 0 && view.head_dim > 0,
             "kv cache view: bad sizes pages={} page_size={} kv_heads={} head_dim={}", view.n_pages,
             view.page_size, view.n_kv_heads, view.head_dim);
}

void kv_write(const float* k, const float* v, const int32_t* slots, int64_t T,
              const KvLayerView& view, const ExecContext& ctx) {
  check_kv_view(view);
  KILN_CHECK(T >= 0, "kv_write: negative row count {}", T);
  // Checked on every thread before anyone writes: all threads agree, nothing half-written.
  const int64_t n_slots = view.n_slots();
  for (int64_t t = 0; t < T; ++t)
    KILN_CHECK(slots[t] < n_slots, "kv_write: slot {} of row {} is outside the pool ({} slots)",
               slots[t], t, n_slots);
  const int64_t row = view.row_elems();
  const auto& f = detail::kv_fns();
  Range r = detail::share(T, ctx, 1, (4096 + row - 1) / row);
  for (int64_t t = r.begin; t < r.end; ++t) {
    if (slots[t] < 0) continue;
    int64_t base = static_cast<int64_t>(slots[t]) * row;
    f.to_f16_row(k + t * row, view.k + base, row);
    f.to_f16_row(v + t * row, view.v + base, row);
  }
}

}  // namespace kiln::kernels
