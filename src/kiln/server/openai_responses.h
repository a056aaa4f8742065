// JSON shapes of the OpenAI API for generated sequences: completion and chat choices (whole
// and streamed), logprobs in each route's format, and usage.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "kiln/server/backend.h"
#include "kiln/server/generation_job.h"

namespace kiln::server {

// "stop" | "length" | "abort"; null while running.
nlohmann::json openai_finish_reason(const SequenceResult& r);

// /v1/completions logprobs object ({"tokens", "token_logprobs", "top_logprobs",
// "text_offset"}) for logprobs[begin, end) of a sequence; `text_offset0` is the offset of the
// first of them in the choice text.
nlohmann::json completion_logprobs(const std::vector<engine::TokenLogprob>& lps, size_t begin,
                                   size_t end, int top_n, size_t text_offset0,
                                   const TextCodec& codec);
// The same object for an echoed prompt: one entry per prompt token, the first without a
// logprob (null, as OpenAI gives it), offsets from 0. Append the output's with
// append_logprobs.
nlohmann::json prompt_completion_logprobs(const SequenceResult& r, int top_n,
                                          const TextCodec& codec);
// Appends the arrays of `tail` to those of `head` (both completion logprobs objects).
void append_logprobs(nlohmann::json& head, const nlohmann::json& tail);
// /v1/chat/completions logprobs object ({"content": [{"token", "logprob", "bytes",
// "top_logprobs"}]}).
nlohmann::json chat_logprobs(const std::vector<engine::TokenLogprob>& lps, size_t begin, size_t end,
                             int top_n, const TextCodec& codec);

// Usage over a job whose sequences come n per prompt (the prompt counted once per prompt).
nlohmann::json openai_usage(const GenerationJob& job, int n);

// "cmpl-<32 hex>" style ids.
std::string random_id(const char* prefix);
int64_t unix_time_now();

}  // namespace kiln::server
