// The tiny fixture models and the Runtime options engine tests open them with.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <string>

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

}  // namespace kiln::testing
