#include "kiln/server/openai_request_parser.h"

#include <algorithm>

#include "kiln/server/http_error.h"
#include "kiln/server/json_fields.h"
#include "kiln/server/sampling_parser.h"
#include "kiln/server/tool_request.h"

namespace kiln::server {

namespace {

void require_object_body(const json& body) {
  if (!body.is_object()) throw HttpError(400, "the request body must be a JSON object");
}

std::string read_model(const json& body) {
  const json* m = field(body, "model");
  return m ? as_string(*m, "model") : std::string();
}

// Fields shared by both OpenAI routes.
void read_openai_common(const json& body, const ParseLimits& limits, GenerationOptions& out,
                        bool& stream, bool& include_usage) {
  read_common_sampling(body, "", limits, out);
  out.n = static_cast<int>(int_field(body, "n", "", 1, 1, limits.max_n));
  out.stop.min_new_tokens = static_cast<int>(int_field(body, "min_tokens", "", 0, 0, INT32_MAX));
  stream = bool_field(body, "stream", "", false);
  include_usage = false;
  if (const json* so = field(body, "stream_options")) {
    as_object(*so, "stream_options");
    include_usage = bool_field(*so, "include_usage", "stream_options", false);
  }
  if (const json* v = field(body, "best_of")) {
    if (as_int(*v, "best_of") != out.n) bad_field("best_of", "other than n is not supported");
  }
  if (const json* v = field(body, "user")) as_string(*v, "user");
  out.priority = static_cast<int32_t>(int_field(body, "priority", "", 0, INT32_MIN, INT32_MAX));
  if (const json* v = field(body, "response_format")) {
    read_response_format(*v, "response_format", out);
  }
  // SGLang's extension fields and llama.cpp's `grammar`.
  read_grammar_fields(body, "", "response_format", out);
}

void check_min_tokens(const GenerationOptions& o) {
  if (o.max_new_tokens_given && o.stop.min_new_tokens > o.stop.max_new_tokens) {
    bad_field("min_tokens", "({}) must not exceed max_tokens ({})", o.stop.min_new_tokens,
              o.stop.max_new_tokens);
  }
}

std::string read_message_content(const json& v, const std::string& path) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) bad_field(path, "must be a string or a list of content parts");
  // Content parts: only text parts exist for a text model; they are concatenated.
  std::string text;
  for (size_t i = 0; i < v.size(); ++i) {
    std::string part_path = fmt::format("{}[{}]", path, i);
    const json& part = as_object(v[i], part_path);
    const json* type = field(part, "type");
    if (!type) bad_field(part_path + ".type", "is required");
    if (as_string(*type, part_path + ".type") != "text") {
      bad_field(part_path + ".type", "'{}' is not supported (only \"text\")",
                type->get<std::string>());
    }
    const json* t = field(part, "text");
    if (!t) bad_field(part_path + ".text", "is required");
    text += as_string(*t, part_path + ".text");
  }
  return text;
}

}  // namespace

CompletionRequest parse_completion_request(const json& body, const ParseLimits& limits) {
  require_object_body(body);
  CompletionRequest out;
  out.model = read_model(body);
  const json* prompt = field(body, "prompt");
  if (!prompt) bad_field("prompt", "is required");
  if (prompt->is_string()) {
    out.prompts.push_back({true, prompt->get<std::string>(), {}});
  } else if (prompt->is_array()) {
    if (prompt->empty()) bad_field("prompt", "must not be an empty list");
    const json& first = (*prompt)[0];
    if (first.is_number()) {  // one prompt as token ids
      out.prompts.push_back({false, {}, as_token_ids(*prompt, "prompt", limits.vocab_size)});
    } else {
      for (size_t i = 0; i < prompt->size(); ++i) {
        std::string path = fmt::format("prompt[{}]", i);
        const json& p = (*prompt)[i];
        if (p.is_string()) {
          out.prompts.push_back({true, p.get<std::string>(), {}});
        } else if (p.is_array()) {
          auto ids = as_token_ids(p, path, limits.vocab_size);
          if (ids.empty()) bad_field(path, "must not be empty");
          out.prompts.push_back({false, {}, std::move(ids)});
        } else {
          bad_field(path, "must be a string or a list of token ids");
        }
      }
    }
  } else {
    bad_field("prompt", "must be a string, a list of strings or a list of token ids");
  }

  out.options.stop.max_new_tokens = 16;  // OpenAI's default for completions
  read_max_tokens(body, "max_tokens", "", out.options);
  read_openai_common(body, limits, out.options, out.stream, out.include_usage);
  check_min_tokens(out.options);
  if (const json* v = field(body, "logprobs")) {
    out.logprobs = static_cast<int>(int_field(body, "logprobs", "", -1, 0, 5));
    (void)v;
  }
  out.echo = bool_field(body, "echo", "", false);
  if (const json* v = field(body, "suffix")) {
    if (!as_string(*v, "suffix").empty()) bad_field("suffix", "is not supported");
  }
  check_json_constraint(out.options, "", "min_tokens");
  return out;
}

ChatRequest parse_chat_request(const json& body, const ParseLimits& limits) {
  require_object_body(body);
  ChatRequest out;
  out.model = read_model(body);
  const json* messages = field(body, "messages");
  if (!messages) bad_field("messages", "is required");
  as_array(*messages, "messages");
  if (messages->empty()) bad_field("messages", "must not be empty");
  // Ids of the calls the last assistant message made, which `tool` messages answer.
  std::vector<std::string> open_calls;
  bool calls_open = false;
  for (size_t i = 0; i < messages->size(); ++i) {
    std::string path = fmt::format("messages[{}]", i);
    const json& m = as_object((*messages)[i], path);
    const json* role = field(m, "role");
    if (!role) bad_field(path + ".role", "is required");
    std::string r = as_string(*role, path + ".role");
    if (r == "developer") r = "system";  // OpenAI's newer name for the system role
    if (r != "system" && r != "user" && r != "assistant" && r != "tool") {
      bad_field(path + ".role", "'{}' is not supported (system, user, assistant, tool)", r);
    }
    ChatMessage turn{r, {}};
    const json* calls = r == "assistant" ? field(m, "tool_calls") : nullptr;
    if (calls && calls->is_array() && calls->empty()) calls = nullptr;  // as if absent
    if (r != "assistant" && field(m, "tool_calls")) {
      bad_field(path + ".tool_calls", "is only allowed on assistant messages");
    }
    if (r == "tool") {
      const json* id = field(m, "tool_call_id");
      if (!id) bad_field(path + ".tool_call_id", "is required on a tool message");
      const std::string& call_id = as_string(*id, path + ".tool_call_id");
      turn.tool_call_id = call_id;
      if (!calls_open) {
        bad_field(path + ".role",
                  "'tool' must answer the tool_calls of a preceding assistant message");
      }
      if (!open_calls.empty() &&
          std::find(open_calls.begin(), open_calls.end(), call_id) == open_calls.end()) {
        bad_field(path + ".tool_call_id", "'{}' is not the id of a preceding tool call", call_id);
      }
    } else {
      calls_open = false;
      open_calls.clear();
    }
    if (calls) {
      turn.tool_calls = read_history_tool_calls(*calls, path, open_calls);
      calls_open = true;
    }
    const json* content = field(m, "content");
    if (content) {
      turn.content = read_message_content(*content, path + ".content");
    } else if (!calls) {
      bad_field(path + ".content", "is required{}",
                r == "assistant" ? " (it may be null only with tool_calls)" : "");
    }
    out.messages.push_back(std::move(turn));
  }

  // Chat has no fixed default: generate until the end of turn or the context (as SGLang does).
  read_max_tokens(body, "max_tokens", "", out.options);
  read_max_tokens(body, "max_completion_tokens", "", out.options);
  if (!out.options.max_new_tokens_given) out.options.stop.max_new_tokens = INT32_MAX;
  read_openai_common(body, limits, out.options, out.stream, out.include_usage);
  check_min_tokens(out.options);
  out.logprobs = bool_field(body, "logprobs", "", false);
  out.top_logprobs =
      static_cast<int>(int_field(body, "top_logprobs", "", 0, 0, limits.max_top_logprobs));
  if (out.top_logprobs > 0 && !out.logprobs) {
    bad_field("top_logprobs", "needs logprobs set to true");
  }
  out.tools = read_chat_tools(body);
  if (out.tools.forced()) {
    if (out.options.sampling.json_schema) {
      bad_field("response_format", "cannot be combined with a tool_choice that forces a call");
    }
    if (out.options.sampling.grammar) {
      bad_field("tool_choice", "cannot force a call together with a regex, ebnf or grammar");
    }
    out.options.sampling.json_schema = compile_forced_call(out.tools, limits.tool_calls);
  } else if (out.tools.parse_calls() &&
             (out.options.sampling.json_schema || out.options.sampling.grammar ||
              out.options.stop.ignore_eos || out.options.stop.min_new_tokens > 0)) {
    check_tool_schemas(out.tools);  // calls go unconstrained here, but a bad schema is refused
  } else if (out.tools.parse_calls()) {
    // auto: free text, but a call the model opens is constrained from its marker on
    // ("<tool_call>"; Mistral: the array after "[TOOL_CALLS]").
    if (auto calls = compile_auto_calls(out.tools, limits.tool_calls)) {
      out.options.sampling.json_schema = std::move(calls);
      out.options.sampling.json_after = auto_call_markers(limits.tool_calls);
    }
  }
  check_json_constraint(out.options, "", "min_tokens");
  return out;
}

}  // namespace kiln::server
