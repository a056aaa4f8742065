// Parses and validates the bodies of POST /v1/completions and POST /v1/chat/completions
// (OpenAI API, plus SGLang's extra sampling fields top_k, min_p, repetition_penalty,
// min_tokens, ignore_eos, skip_special_tokens, stop_token_ids). Fields OpenAI defines that
// kiln does not implement are accepted only with their no-op value (echo=false, best_of=1,
// tools=[] ...); anything else is a 400 naming the field.
#pragma once
#include <nlohmann/json.hpp>

#include "kiln/server/parsed_requests.h"

namespace kiln::server {

CompletionRequest parse_completion_request(const nlohmann::json& body, const ParseLimits& limits);
ChatRequest parse_chat_request(const nlohmann::json& body, const ParseLimits& limits);

}  // namespace kiln::server
