// The KV pool and the shapes of every forward step, derived once from the model and the user's
// options. Runtime sizes its pool and its runner from it, the model runner and the graph runner
// shape eager steps and captured plans with it, and `kiln graph` inspects the same shapes
// without loading weights: a change to how the pool or the block table is sized is made here.
#pragma once
#include <cstdint>

#include "kiln/engine/kv_pool.h"
#include "kiln/kernels/kv_cache.h"
#include "kiln/model/model_config.h"
#include "kiln/model/transformer.h"

namespace kiln::engine {

struct GeometryOptions {
  // Tokens the pool holds; 0: the memory of 65536 f16 tokens (about twice as many in q8).
  int64_t kv_tokens = 0;
  int64_t context_length = 0;  // 0: the model's; always capped by the pool
  int page_size = 16;          // (0, 1024]
  kernels::KvDtype kv_dtype = kernels::KvDtype::F16;
};

struct ServingGeometry {
  KvPoolConfig kv;
  int64_t context_length = 0;     // positions one sequence may reach
  int64_t max_pages_per_seq = 0;  // columns of the block table

  // The forward shape of a step of `seqs` sequences and `tokens` rows over this pool, every
  // row's logits returned (or argmax ids with `greedy`).
  model::ForwardShape forward_shape(int64_t seqs = 1, int64_t tokens = 1,
                                    bool greedy = false) const;
};

// Throws kiln::Error for a page size out of range.
ServingGeometry derive_serving_geometry(const model::ModelConfig& config,
                                        const GeometryOptions& options);

}  // namespace kiln::engine
