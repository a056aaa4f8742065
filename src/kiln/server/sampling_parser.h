// Sampling and stopping parameters shared by every generation route. SGLang's `sampling_params`
// object and the OpenAI top-level fields use mostly the same names; each route says which
// names it reads, and this file checks each value's type and range the same way everywhere.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "kiln/engine/json/json_schema.h"
#include "kiln/server/parsed_requests.h"

namespace kiln::server {

// Reads the fields common to SGLang and OpenAI (temperature, top_p, top_k, min_p, the three
// penalties, stop, stop_token_ids, ignore_eos, skip_special_tokens, seed, min_new_tokens) from
// `obj` into `out`. `prefix` is the object's path for error messages ("sampling_params" or "").
void read_common_sampling(const nlohmann::json& obj, const std::string& prefix,
                          const ParseLimits& limits, GenerationOptions& out);

// Reads `key` as a max-token count into out.stop.max_new_tokens (marking it given).
void read_max_tokens(const nlohmann::json& obj, const char* key, const std::string& prefix,
                     GenerationOptions& out);

// Compiles a JSON schema; a schema the compiler refuses is a 400 naming the keyword under
// `path` ("tools[0].function.parameters.properties.x.pattern").
std::shared_ptr<const engine::JsonSchema> compile_schema(const nlohmann::json& schema,
                                                         const std::string& path);

// OpenAI's `response_format` ({"type": "text" | "json_object" | "json_schema", ...}) into
// out.sampling.json_schema; `path` is its name for errors.
void read_response_format(const nlohmann::json& v, const std::string& path, GenerationOptions& out);

// 400 when a JSON constraint is combined with a parameter that keeps it from ending (the
// constraint allows end of sequence only once the value is complete). `prefix` as above,
// `min_tokens_key` the route's name for min_new_tokens.
void check_json_constraint(const GenerationOptions& out, const std::string& prefix,
                           const char* min_tokens_key);

// The grammar constraints: SGLang's `regex` (whole output) and `ebnf`, llama.cpp's `grammar`
// (GBNF), each a string (null: none), compiled (cached) into out.sampling.grammar. A grammar that
// does not compile is a 400 naming the field and the rule or position; two constraints (two of
// these, or one and a JSON schema already read under `json_key`) are a 400 naming both.
// Returns the key read ("" when none).
std::string read_grammar_fields(const nlohmann::json& obj, const std::string& prefix,
                                const char* json_key, GenerationOptions& out);

// SGLang's `sampling_params` object (POST /generate). Unknown keys are errors: a misspelt
// parameter ("max_tokens" here) would otherwise be silently ignored.
GenerationOptions parse_sglang_sampling_params(const nlohmann::json& obj,
                                               const ParseLimits& limits);

}  // namespace kiln::server
