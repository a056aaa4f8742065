// The paged KV cache as kernels see it: K and V of ONE layer in f16, laid out
// [pages][page_size][kv_heads][head_dim]. A slot is page * page_size + offset, so a row of
// kv_heads * head_dim values at slot s starts at element s * kv_heads * head_dim.
#pragma once
#include <cstdint>

#include "kiln/kernels/exec_context.h"

namespace kiln::kernels {

struct KvLayerView {
  uint16_t* k = nullptr;
  uint16_t* v = nullptr;
  int64_t n_pages = 0;
  int page_size = 0;
  int n_kv_heads = 0;
  int head_dim = 0;

  int64_t n_slots() const { return n_pages * page_size; }
  int64_t row_elems() const { return static_cast<int64_t>(n_kv_heads) * head_dim; }
};

// Throws kiln::Error unless the view is well formed (non-null, positive sizes).
void check_kv_view(const KvLayerView& view);

// Converts rows of k and v (f32 [T, kv_heads*head_dim]) to f16 (round to nearest even, as
// F16C does) and stores them at slots[t]. slots[t] < 0 marks an inert row (padding): skipped.
// Every thread validates all slots before writing anything, so a bad slot throws kiln::Error
// on all threads and leaves the cache untouched. Threads split the rows.
void kv_write(const float* k, const float* v, const int32_t* slots, int64_t T,
              const KvLayerView& view, const ExecContext& ctx);

}  // namespace kiln::kernels
