#include "kiln/server/request_builder.h"

#include <algorithm>

#include "kiln/engine/json/json_min_bytes.h"
#include "kiln/server/http_error.h"

namespace kiln::server {

int64_t max_prompt_token_count(const PromptLimits& limits) {
  int64_t most = limits.context_length - 1;
  if (limits.max_prompt_tokens > 0) most = std::min(most, limits.max_prompt_tokens);
  return most;
}

std::vector<int32_t> tokenize_prompt(const PromptInput& prompt, const TextCodec& codec,
                                     const PromptLimits& limits, const std::string& prompt_field) {
  if (!prompt.is_text) return prompt.ids;
  const size_t per_token = codec.max_token_bytes();
  if (per_token > 0) {
    const size_t bytes = prompt.text.size();
    const auto fewest_tokens = static_cast<int64_t>((bytes + per_token - 1) / per_token);
    const int64_t most = max_prompt_token_count(limits);
    if (fewest_tokens > most) {
      bad_field(prompt_field,
                "is {} bytes long, so at least {} tokens (a token covers at most {} bytes), "
                "more than the {} tokens a prompt may have (context length {})",
                bytes, fewest_tokens, per_token, most, limits.context_length);
    }
  }
  return codec.encode(prompt.text, /*add_special=*/true);
}

void check_sequence_count(int64_t sequences, int64_t max_sequences, const std::string& field) {
  if (max_sequences > 0 && sequences > max_sequences) {
    bad_field(field,
              "asks for {} sequences (n samples of each prompt), more than the server's "
              "queue of {} requests",
              sequences, max_sequences);
  }
}

namespace {

// A value the schema allows must fit in the tokens the request may generate: else generation
// would run to max_tokens and end with a value the schema refuses. Only a constraint from the
// first token (a marker-opened one may never open).
void check_constraint_fits(const engine::GenerateRequest& req, const GenerationOptions& options,
                           const PromptLimits& limits) {
  if (!req.sampling.json_schema || !req.sampling.json_after.empty()) return;
  if (limits.max_token_bytes == 0) return;
  const uint64_t need = engine::json_min_bytes(*req.sampling.json_schema);
  const uint64_t room = static_cast<uint64_t>(req.stop.max_new_tokens) *
                        static_cast<uint64_t>(limits.max_token_bytes);
  if (need <= room) return;
  const std::string field = options.max_new_tokens_given ? options.max_tokens_field : "max_tokens";
  bad_field(field,
            "({} tokens of at most {} bytes each) cannot hold the shortest value the JSON schema "
            "allows ({} bytes or more): lower minLength/minItems or raise the token limit",
            req.stop.max_new_tokens, limits.max_token_bytes,
            need >= UINT64_MAX / 4 ? std::string("unbounded") : std::to_string(need));
}

}  // namespace

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
  check_constraint_fits(req, options, limits);
  req.skip_special_tokens = options.skip_special_tokens;
  req.logprobs = logprobs;
  req.priority = options.priority;
  return req;
}

}  // namespace kiln::server
