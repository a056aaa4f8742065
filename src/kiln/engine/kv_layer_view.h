// Where the engine gets kernels::KvLayerView from. The `kernels` layer owns the struct (in
// kiln/kernels/kv_cache.h); until that header exists on this branch, an identical definition
// stands in so the engine builds on its own. Delete the fallback once kv_cache.h is in main.
#pragma once
#include <cstdint>

#if __has_include("kiln/kernels/kv_cache.h")
#include "kiln/kernels/kv_cache.h"
#else
namespace kiln::kernels {
// One layer's K and V in the paged pool, each [n_pages][page_size][n_kv_heads][head_dim] f16.
struct KvLayerView {
  uint16_t* k;
  uint16_t* v;
  int64_t n_pages;
  int page_size;
  int n_kv_heads;
  int head_dim;
};
}  // namespace kiln::kernels
#endif
