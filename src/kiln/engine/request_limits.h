// What the engine can run, checked when a request is submitted (before it is queued): token
// ids inside the vocabulary, sampling and stop conditions that make sense together, and a
// prompt plus max_new_tokens that fits the context and, alone, the KV pool (a request that
// could not fit even alone would be preempted forever).
#pragma once
#include <cstdint>

#include "kiln/engine/request.h"

namespace kiln::engine {

struct RequestLimits {
  int64_t vocab = 0;      // the model's outputs
  int64_t context = 0;    // tokens per request (the model's, or EngineConfig::max_context)
  int64_t kv_pages = 0;   // the KV pool's pages
  int64_t page_size = 1;  // tokens per page
};

// Throws kiln::Error naming what the engine can never run.
void validate(const GenerateRequest& request, const RequestLimits& limits);

}  // namespace kiln::engine
