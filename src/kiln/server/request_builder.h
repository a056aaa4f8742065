// From a parsed prompt to an engine request: tokenization, the context-length checks, and the
// expansion of n samples per prompt. Every failure is a 400 naming the prompt field.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/engine/request.h"
#include "kiln/server/backend.h"
#include "kiln/server/parsed_requests.h"

namespace kiln::server {

struct PromptLimits {
  int64_t context_length = 0;     // prompt + generated tokens must fit
  int64_t max_prompt_tokens = 0;  // 0: only the context limits the prompt
};

// Token ids of a prompt (text is encoded with the model's special tokens, e.g. BOS).
std::vector<int32_t> tokenize_prompt(const PromptInput& prompt, const TextCodec& codec);

// The engine request for sample `sample_index` (0..n-1) of a prompt. A default max_new_tokens
// is clamped to the room left in the context; an explicit one that does not fit is an error.
// With a seed, sample i uses seed + i so that n samples differ yet stay reproducible.
engine::GenerateRequest make_engine_request(std::vector<int32_t> prompt_ids,
                                            const GenerationOptions& options, int sample_index,
                                            int logprobs, const PromptLimits& limits,
                                            const std::string& prompt_field);

}  // namespace kiln::server
