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
  size_t max_token_bytes = 0;     // the most bytes one token writes (0: unknown)
};

// The most tokens a prompt may have: below the context length (one token must be generated)
// and within max_prompt_tokens when that is set.
int64_t max_prompt_token_count(const PromptLimits& limits);

// Token ids of a prompt (text is encoded with the model's special tokens, e.g. BOS). A text
// too long to fit `limits` whatever it says is refused (400 naming `prompt_field`) before it
// is tokenized: a token stands for at most codec.max_token_bytes() bytes of text, so B bytes
// are at least B / max_token_bytes() tokens. Tokenizing a 10 MB prompt only to refuse it took
// seconds and hundreds of MiB.
std::vector<int32_t> tokenize_prompt(const PromptInput& prompt, const TextCodec& codec,
                                     const PromptLimits& limits, const std::string& prompt_field);

// Refuses (400 naming `field`) a request that would submit more sequences (n samples of each
// prompt) than the engine's queue holds: it could never be accepted whole, and a part of it
// would fill the queue for everyone else before failing with 503.
void check_sequence_count(int64_t sequences, int64_t max_sequences, const std::string& field);

// The engine request for sample `sample_index` (0..n-1) of a prompt. A default max_new_tokens
// is clamped to the room left in the context; an explicit one that does not fit is an error.
// With a seed, sample i uses seed + i so that n samples differ yet stay reproducible.
engine::GenerateRequest make_engine_request(std::vector<int32_t> prompt_ids,
                                            const GenerationOptions& options, int sample_index,
                                            int logprobs, const PromptLimits& limits,
                                            const std::string& prompt_field);

}  // namespace kiln::server
