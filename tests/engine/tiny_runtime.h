// The tiny fixture models and the Runtime options engine tests open them with.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "kiln/engine/runtime.h"
#include "tiny_models.h"

namespace kiln::testing {

// Two threads, a small KV pool and context, plans up to max_bs; tests never touch the user's
// compile cache.
inline engine::RuntimeOptions tiny_runtime_options(const std::filesystem::path& model,
                                                   engine::GraphMode mode, int max_bs) {
  engine::RuntimeOptions o;
  o.model_path = model.string();
  o.threads = 2;
  o.graph_mode = mode;
  o.max_graph_bs = max_bs;
  o.kv_tokens = 16384;
  o.context_length = 256;
  o.compile_cache = false;
  return o;
}

// `len` random ordinary ids (ids 0-2 are left to the fixtures' special tokens), seeded.
inline std::vector<int32_t> random_ids(int len, uint64_t seed, int64_t vocab) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> ids;
  for (int i = 0; i < len; ++i)
    ids.push_back(static_cast<int32_t>(3 + rng() % static_cast<uint64_t>(vocab - 3)));
  return ids;
}

// n prompts of random ordinary ids (ids 0-2 are left to the fixtures' special tokens), of very
// different lengths: 1 .. max_len tokens each.
inline std::vector<std::vector<int32_t>> random_prompts(int n, int64_t vocab, uint32_t seed,
                                                        int max_len = 90) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int32_t>> out(n);
  for (int i = 0; i < n; ++i) {
    const int len = 1 + static_cast<int>(rng() % static_cast<uint32_t>(max_len));
    for (int t = 0; t < len; ++t) out[i].push_back(static_cast<int32_t>(3 + rng() % (vocab - 3)));
  }
  return out;
}

}  // namespace kiln::testing
