#include "kiln/server/request_builder.h"

#include <algorithm>

#include "kiln/server/http_error.h"

namespace kiln::server {

std::vector<int32_t> tokenize_prompt(const PromptInput& prompt, const TextCodec& codec) {
  if (!prompt.is_text) return prompt.ids;
  return codec.encode(prompt.text, /*add_special=*/true);
}

engine::GenerateRequest make_engine_request(std::vector<int32_t> prompt_ids,
                                            const GenerationOptions& options, int sample_index,
                                            int logprobs, const PromptLimits& limits,
                                            const std::string& prompt_field) {
  const auto n_prompt = static_cast<int64_t>(prompt_ids.size());
  if (n_prompt == 0) bad_field(prompt_field, "is empty (no tokens to generate from)");
  if (limits.max_prompt_tokens > 0 && n_prompt > limits.max_prompt_tokens) {
    bad_field(prompt_field, "has {} tokens, more than the server's limit of {}", n_prompt,
              limits.max_prompt_tokens);
  }
  if (n_prompt >= limits.context_length) {
    bad_field(prompt_field, "({} tokens) is longer than the model's context length ({} tokens)",
              n_prompt, limits.context_length);
  }
  engine::GenerateRequest req;
  req.prompt_ids = std::move(prompt_ids);
  req.sampling = options.sampling;
  if (options.sampling.seed) req.sampling.seed = *options.sampling.seed + sample_index;
  req.stop = options.stop;
  const int64_t room = limits.context_length - n_prompt;
  if (req.stop.max_new_tokens > room) {
    if (options.max_new_tokens_given) {
      bad_field(options.max_tokens_field,
                "({}) plus the prompt ({} tokens) exceeds the context length ({} tokens)",
                req.stop.max_new_tokens, n_prompt, limits.context_length);
    }
    req.stop.max_new_tokens = static_cast<int>(room);
  }
  req.stop.min_new_tokens = std::min(req.stop.min_new_tokens, req.stop.max_new_tokens);
  req.skip_special_tokens = options.skip_special_tokens;
  req.logprobs = logprobs;
  return req;
}

}  // namespace kiln::server
