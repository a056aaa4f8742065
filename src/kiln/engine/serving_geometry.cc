#include "kiln/engine/serving_geometry.h"

#include <algorithm>

#include "kiln/base/error.h"

namespace kiln::engine {
namespace {

// What the KV pool holds when the user does not say: the memory of this many f16 tokens,
// plenty for the default batch sizes on small models, and bounded for large ones. A q8 cache
// fits about twice as many tokens in it.
constexpr int64_t kDefaultKvTokens = 65536;

int64_t default_kv_tokens(const model::ModelConfig& c, kernels::KvDtype dtype) {
  kernels::KvGeometry g{c.n_layers, 1, 1, c.n_kv_heads, c.head_dim, kernels::KvDtype::F16};
  const size_t budget = kernels::kv_bytes_per_token(g) * kDefaultKvTokens;
  g.dtype = dtype;
  return static_cast<int64_t>(budget / kernels::kv_bytes_per_token(g));
}

}  // namespace

model::ForwardShape ServingGeometry::forward_shape(int64_t seqs, int64_t tokens,
                                                   bool greedy) const {
  model::ForwardShape s;
  s.tokens = tokens;
  s.seqs = seqs;
  s.max_pages_per_seq = max_pages_per_seq;
  s.logit_rows = -1;
  s.greedy = greedy;
  s.kv_pages = kv.n_pages;
  s.page_size = kv.page_size;
  s.kv_dtype = kv.dtype;
  return s;
}

ServingGeometry derive_serving_geometry(const model::ModelConfig& config,
                                        const GeometryOptions& o) {
  KILN_CHECK(o.page_size > 0 && o.page_size <= 1024, "page size {} out of range", o.page_size);
  const int64_t kv_tokens = o.kv_tokens > 0 ? o.kv_tokens : default_kv_tokens(config, o.kv_dtype);
  ServingGeometry g;
  g.kv.n_layers = config.n_layers;
  g.kv.n_kv_heads = config.n_kv_heads;
  g.kv.head_dim = config.head_dim;
  g.kv.page_size = o.page_size;
  g.kv.n_pages = (kv_tokens + o.page_size - 1) / o.page_size;
  g.kv.dtype = o.kv_dtype;
  g.context_length =
      std::min<int64_t>(o.context_length > 0 ? o.context_length : config.context_length, kv_tokens);
  g.max_pages_per_seq = (g.context_length + o.page_size - 1) / o.page_size;
  return g;
}

}  // namespace kiln::engine
