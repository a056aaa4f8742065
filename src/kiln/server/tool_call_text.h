// Text helpers the tool-call parsers share (tool_call_parsers.h).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace kiln::server::tool_text {

inline bool is_space(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// Bytes at the end of `s` that could begin `tag` (held back until the next piece decides).
size_t partial_tag_at_end(std::string_view s, std::string_view tag);

// A fresh OpenAI call id, "call_<24 hex>".
std::string call_id();

// Matches `{"name": "<name>", "<args_key>": ` (any whitespace between the tokens) at the start
// of `s`. Returns the end of the match, 0 when `s` cannot start that way, kMore when it may but
// is still too short to tell.
constexpr size_t kMore = std::string_view::npos;
size_t match_header(std::string_view s, std::string_view args_key, std::string& name);

// Whether `value` is a call object {"name": <string>, "<args_key>": ...} and nothing else.
bool is_call_object(const nlohmann::ordered_json& value, std::string_view args_key);

// The model's JSON (a call, its arguments) parsed with the input nesting limit: a discarded
// value when it is not JSON or nests deeper (an unconstrained model can write anything, and the
// call is dumped and copied recursively afterwards). Such text is no call: it stays content.
nlohmann::ordered_json parse_model_json(std::string_view text);

}  // namespace kiln::server::tool_text
