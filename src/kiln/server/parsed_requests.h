// HTTP request bodies after parsing and validation, before tokenization. One struct per route
// family; the parsers (native_request_parser.h, openai_request_parser.h) fill them.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kiln/engine/request.h"
#include "kiln/server/backend.h"

namespace kiln::server {

// A prompt as the client gave it: text to tokenize, or token ids as they are.
struct PromptInput {
  bool is_text = true;
  std::string text;
  std::vector<int32_t> ids;
};

// Sampling and stopping for one prompt. `max_new_tokens_given` tells a client's explicit limit
// (an error when it does not fit the context) from the route's default (clamped to fit).
struct GenerationOptions {
  engine::SamplingParams sampling;
  engine::StopConditions stop;
  bool max_new_tokens_given = false;
  std::string max_tokens_field = "max_new_tokens";  // its name in the request, for errors
  bool skip_special_tokens = true;
  int n = 1;  // samples per prompt
  // The request's `priority` (engine::GenerateRequest::priority): a top-level field of SGLang's
  // /generate, and kiln's extension field of both OpenAI routes.
  int32_t priority = 0;
};

// POST /generate (SGLang native).
struct NativeGenerateRequest {
  std::vector<PromptInput> prompts;
  bool is_batch = false;                   // `text`/`input_ids` was a list of prompts
  std::vector<GenerationOptions> options;  // one per prompt
  bool stream = false;
  bool return_logprob = false;
  int top_logprobs_num = 0;
  bool return_text_in_logprobs = false;
  int logprob_start_len = -1;  // with return_logprob: prompt logprobs from this position on
};

// POST /v1/completions.
struct CompletionRequest {
  std::string model;
  std::vector<PromptInput> prompts;
  GenerationOptions options;
  bool stream = false;
  bool include_usage = false;
  int logprobs = -1;  // -1: none; k >= 0: the chosen token and k alternatives
  bool echo = false;  // the prompt precedes the completion (with logprobs: its logprobs too)
};

// OpenAI function tools of a chat request (tool_request.h).
enum class ToolChoice { kAuto, kNone, kRequired, kFunction };
struct ChatTool {
  std::string name;
  nlohmann::json parameters;  // the function's JSON schema (no parameters when absent)
};
struct ChatTools {
  std::vector<ChatTool> tools;  // empty: the request has none
  ToolChoice choice = ToolChoice::kAuto;
  std::string function;  // the tool kToolChoice::kFunction names
  bool parallel = true;  // parallel_tool_calls
  // The model must call (required or a named function): the reply is constrained to one call.
  bool forced() const { return choice == ToolChoice::kRequired || choice == ToolChoice::kFunction; }
  // The reply is read for calls (auto or forced; "none" leaves it as text).
  bool parse_calls() const { return !tools.empty() && choice != ToolChoice::kNone; }
};

// POST /v1/chat/completions.
struct ChatRequest {
  std::string model;
  std::vector<ChatMessage> messages;
  GenerationOptions options;
  bool stream = false;
  bool include_usage = false;
  bool logprobs = false;
  int top_logprobs = 0;
  ChatTools tools;
};

// Limits the parsers enforce (from the served model and the server options).
struct ParseLimits {
  int64_t vocab_size = 0;
  int max_n = 64;
  int max_top_logprobs = 20;
  size_t max_stop_strings = 64;       // in one `stop`
  size_t max_stop_bytes = 64u << 10;  // all of one `stop` together
  size_t max_logit_bias = 1024;       // entries of one logit_bias
  // The served model's tool-call format: the shape a call's constraint takes.
  ToolCallFormat tool_calls = ToolCallFormat::kHermes;
};

}  // namespace kiln::server
