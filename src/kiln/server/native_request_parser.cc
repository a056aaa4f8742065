#include "kiln/server/native_request_parser.h"

#include "kiln/server/http_error.h"
#include "kiln/server/json_fields.h"
#include "kiln/server/sampling_parser.h"

namespace kiln::server {

namespace {

void read_prompts(const json& body, const ParseLimits& limits, NativeGenerateRequest& out) {
  const json* text = field(body, "text");
  const json* ids = field(body, "input_ids");
  if (text && ids) bad_field("text", "and input_ids are mutually exclusive; give one");
  if (!text && !ids) bad_field("text", "or input_ids is required");
  if (text) {
    if (text->is_string()) {
      out.prompts.push_back({true, text->get<std::string>(), {}});
      return;
    }
    if (!text->is_array()) bad_field("text", "must be a string or a list of strings");
    if (text->empty()) bad_field("text", "must not be an empty list");
    out.is_batch = true;
    for (size_t i = 0; i < text->size(); ++i) {
      out.prompts.push_back({true, as_string((*text)[i], fmt::format("text[{}]", i)), {}});
    }
    return;
  }
  as_array(*ids, "input_ids");
  if (ids->empty()) bad_field("input_ids", "must not be empty");
  if ((*ids)[0].is_array()) {
    out.is_batch = true;
    for (size_t i = 0; i < ids->size(); ++i) {
      std::string path = fmt::format("input_ids[{}]", i);
      auto prompt = as_token_ids((*ids)[i], path, limits.vocab_size);
      if (prompt.empty()) bad_field(path, "must not be empty");
      out.prompts.push_back({false, {}, std::move(prompt)});
    }
    return;
  }
  out.prompts.push_back({false, {}, as_token_ids(*ids, "input_ids", limits.vocab_size)});
}

}  // namespace

NativeGenerateRequest parse_native_generate(const json& body, const ParseLimits& limits) {
  if (!body.is_object()) throw HttpError(400, "the request body must be a JSON object");
  NativeGenerateRequest out;
  // SGLang's /generate takes a prompt already rendered and has no tool calling: refused rather
  // than ignored, so a client that sends tools learns where they work.
  for (const char* name : {"tools", "tool_choice"}) {
    if (field(body, name) != nullptr) {
      bad_field(name,
                "is not taken by /generate (a rendered prompt, as in SGLang); tool calling is "
                "served on /v1/chat/completions, and /generate output can be constrained with "
                "sampling_params.json_schema");
    }
  }
  read_prompts(body, limits, out);

  const json* sp = field(body, "sampling_params");
  if (sp && sp->is_array()) {
    if (!out.is_batch || sp->size() != out.prompts.size()) {
      bad_field("sampling_params", "as a list needs one entry per prompt ({} prompts, {} entries)",
                out.prompts.size(), sp->size());
    }
    for (const auto& p : *sp) out.options.push_back(parse_sglang_sampling_params(p, limits));
  } else {
    GenerationOptions opts = sp ? parse_sglang_sampling_params(*sp, limits)
                                : parse_sglang_sampling_params(json::object(), limits);
    out.options.assign(out.prompts.size(), opts);
  }
  const auto priority =
      static_cast<int32_t>(int_field(body, "priority", "", 0, INT32_MIN, INT32_MAX));
  for (GenerationOptions& o : out.options) o.priority = priority;

  out.stream = bool_field(body, "stream", "", false);
  out.return_logprob = bool_field(body, "return_logprob", "", false);
  out.top_logprobs_num =
      static_cast<int>(int_field(body, "top_logprobs_num", "", 0, 0, limits.max_top_logprobs));
  out.return_text_in_logprobs = bool_field(body, "return_text_in_logprobs", "", false);
  // With return_logprob, the prompt's logprobs from this position on (-1: none of them). Its
  // upper bound, the prompt's length, is checked once the prompt is tokenized.
  out.logprob_start_len =
      static_cast<int>(int_field(body, "logprob_start_len", "", -1, -1, INT32_MAX));
  return out;
}

}  // namespace kiln::server
