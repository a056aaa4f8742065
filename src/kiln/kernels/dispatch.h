// Internal helpers shared by the kernels' public entry points (baseline code only): picking
// the ISA table and splitting work across a worker group.
#pragma once
#include <cstdint>

#include "kiln/base/cpu_features.h"
#include "kiln/base/thread_pool.h"
#include "kiln/kernels/exec_context.h"

namespace kiln::kernels::detail {

template <class T>
const T& pick_isa(const T& scalar, const T& avx2, const T& avx512) {
  switch (active_isa()) {
    case Isa::Avx512:
      return avx512;
    case Isa::Avx2:
      return avx2;
    default:
      return scalar;
  }
}

// This thread's share of n items, in multiples of `align`. Below `min_per_thread` items per
// thread the split costs more than it saves, so fewer threads take part (the rest get an
// empty range). Which thread computes an item never changes its value.
inline Range share(int64_t n, const ExecContext& ctx, int64_t align = 1,
                   int64_t min_per_thread = 1) {
  int64_t useful = min_per_thread > 0 ? n / min_per_thread : ctx.nth;
  int nth = static_cast<int>(useful < ctx.nth ? (useful < 1 ? 1 : useful) : ctx.nth);
  if (ctx.tid >= nth) return {n, n};
  return split_range(n, ctx.tid, nth, align);
}

}  // namespace kiln::kernels::detail
