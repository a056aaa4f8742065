// Parses and validates the body of SGLang's POST /generate:
//   {"text": str | [str], "input_ids": [int] | [[int]], "sampling_params": {...} | [{...}],
//    "stream": bool, "return_logprob": bool, "top_logprobs_num": int,
//    "return_text_in_logprobs": bool}
// Exactly one of text/input_ids; a list of prompts is a batch (its response is a list).
#pragma once
#include <nlohmann/json.hpp>

#include "kiln/server/parsed_requests.h"

namespace kiln::server {

// Throws HttpError(400) naming the offending field.
NativeGenerateRequest parse_native_generate(const nlohmann::json& body, const ParseLimits& limits);

}  // namespace kiln::server
