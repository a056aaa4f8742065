// JSON shapes of SGLang's native API for generated sequences:
//   {"text": ..., "output_ids": [...], "meta_info": {"id", "finish_reason", "prompt_tokens",
//    "completion_tokens", "cached_tokens", "e2e_latency", logprobs...}}
// finish_reason is null while running, else {"type": "stop", "matched": str|int|null},
// {"type": "length", "length": n} or {"type": "abort", "message": ...}.
#pragma once
#include <nlohmann/json.hpp>

#include "kiln/server/backend.h"
#include "kiln/server/generation_job.h"
#include "kiln/server/parsed_requests.h"

namespace kiln::server {

nlohmann::json native_finish_reason(const SequenceResult& r);

// The output object for one sequence as it stands (text and ids so far: SGLang streams the
// cumulative text, not deltas).
nlohmann::json native_output(const SequenceResult& r, const NativeGenerateRequest& request,
                             const TextCodec& codec);

}  // namespace kiln::server
