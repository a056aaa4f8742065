// Typed reads of request JSON. Every function names the field in its error (a 400 HttpError),
// so a client sending {"temperature": "hot"} learns which field is wrong and why. `path` is the
// field's full name as the client sees it ("sampling_params.top_k", "messages[2].content").
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace kiln::server {

using nlohmann::json;

// The value under `key`, or nullptr when absent or JSON null (both mean "not given").
const json* field(const json& object, const char* key);

// Conversions of one value; `path` names it in errors.
int64_t as_int(const json& v, const std::string& path);
double as_number(const json& v, const std::string& path);
bool as_bool(const json& v, const std::string& path);
const std::string& as_string(const json& v, const std::string& path);
const json& as_object(const json& v, const std::string& path);
const json& as_array(const json& v, const std::string& path);
// A string, or a list of strings (OpenAI/SGLang `stop`).
std::vector<std::string> as_string_list(const json& v, const std::string& path);
// A list of token ids, each in [0, vocab_size).
std::vector<int32_t> as_token_ids(const json& v, const std::string& path, int64_t vocab_size);

// JSON text carried in a string field (SGLang's json_schema, a tool call's arguments), parsed
// with the nesting limit (base/bounded_json.h): a 400 naming `path` when it is not JSON or
// nests too deep.
json parse_json_text(const std::string& text, const std::string& path);
nlohmann::ordered_json parse_ordered_json_text(const std::string& text, const std::string& path);

// Optional fields of an object with a range check: absent/null keeps `fallback`.
int64_t int_field(const json& obj, const char* key, const std::string& prefix, int64_t fallback,
                  int64_t lo, int64_t hi);
double number_field(const json& obj, const char* key, const std::string& prefix, double fallback,
                    double lo, double hi);
bool bool_field(const json& obj, const char* key, const std::string& prefix, bool fallback);

// Joins a prefix and a key into a field path: ("sampling_params", "top_k") ->
// "sampling_params.top_k".
std::string field_path(const std::string& prefix, const char* key);

}  // namespace kiln::server
