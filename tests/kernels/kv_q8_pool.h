// A standalone q8 KV layer for kernel tests: int8 K/V planes and their per-(slot, KV head)
// scales in vectors, filled with sentinels so that untouched slots can be recognized.
#pragma once
#include <cstdint>
#include <vector>

#include "kiln/kernels/kv_cache.h"

namespace kiln::kernels::testing {

constexpr int8_t kQ8Sentinel = 0x5a;
constexpr float kScaleSentinel = -7.0f;

struct Q8Pool {
  std::vector<int8_t> k8, v8;
  std::vector<float> ks, vs;
  KvLayerView view;

  Q8Pool(int64_t pages, int page_size, int kv_heads, int hd)
      : k8(static_cast<size_t>(pages * page_size * kv_heads * hd), kQ8Sentinel),
        v8(k8.size(), kQ8Sentinel),
        ks(static_cast<size_t>(pages * page_size * kv_heads), kScaleSentinel),
        vs(ks.size(), kScaleSentinel) {
    view.n_pages = pages;
    view.page_size = page_size;
    view.n_kv_heads = kv_heads;
    view.head_dim = hd;
    view.dtype = KvDtype::Q8;
    view.k8 = k8.data();
    view.v8 = v8.data();
    view.k_scale = ks.data();
    view.v_scale = vs.data();
  }
  Q8Pool(const Q8Pool&) = delete;
  Q8Pool& operator=(const Q8Pool&) = delete;
};

}  // namespace kiln::kernels::testing
