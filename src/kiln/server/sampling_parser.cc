#include "kiln/server/sampling_parser.h"

#include <fmt/format.h>

#include <array>
#include <limits>
#include <string_view>

#include "kiln/engine/grammar/grammar_ast.h"
#include "kiln/engine/grammar/grammar_cache.h"
#include "kiln/engine/json/json_schema_cache.h"
#include "kiln/server/http_error.h"
#include "kiln/server/json_fields.h"

namespace kiln::server {

namespace {

// The engine looks for every stop string in the text after each token of the sequence, so
// their number and size are capped (ParseLimits) well above any real use.
void check_stop_strings(const std::vector<std::string>& stops, const ParseLimits& limits,
                        const std::string& path) {
  if (stops.size() > limits.max_stop_strings) {
    bad_field(path, "has {} stop strings, more than {}", stops.size(), limits.max_stop_strings);
  }
  size_t bytes = 0;
  for (const auto& s : stops) bytes += s.size();
  if (bytes > limits.max_stop_bytes) {
    bad_field(path, "has {} bytes of stop strings, more than {}", bytes, limits.max_stop_bytes);
  }
}

constexpr int64_t kIntMax = std::numeric_limits<int32_t>::max();

// SGLang parameters kiln does not implement, accepted only with a value that changes nothing,
// so clients that always send them (with defaults) keep working and others get a clear 400.
bool is_inert_unsupported(std::string_view key, const json& v) {
  static constexpr std::array<std::string_view, 3> kNullOnly = {"structural_tag", "custom_params",
                                                                "stop_regex"};
  for (auto k : kNullOnly) {
    if (key == k) return v.is_null() || (v.is_array() && v.empty());
  }
  if (key == "no_stop_trim") return v.is_null() || v == false;
  return false;
}

// OpenAI's and SGLang's logit_bias: {"<token id>": bias, ...}, bias in [-100, 100].
std::vector<std::pair<int32_t, float>> read_logit_bias(const json& v, const std::string& path,
                                                       const ParseLimits& limits) {
  std::vector<std::pair<int32_t, float>> out;
  if (v.is_null()) return out;
  const json& obj = as_object(v, path);
  if (obj.size() > limits.max_logit_bias) {
    bad_field(path, "has {} entries, more than {}", obj.size(), limits.max_logit_bias);
  }
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    const std::string& key = it.key();
    int64_t id = -1;
    const bool digits = !key.empty() && key.size() <= 10 &&
                        key.find_first_not_of("0123456789") == std::string::npos;
    if (digits) id = std::stoll(key);
    if (id < 0 || id >= limits.vocab_size) {
      bad_field(path, "key '{}' is not a token id in [0, {})", key, limits.vocab_size);
    }
    const std::string entry = fmt::format("{}[\"{}\"]", path, key);
    const double bias = as_number(it.value(), entry);
    if (!(bias >= -100.0 && bias <= 100.0))
      bad_field(entry, "must be in [-100, 100], got {}", bias);
    out.emplace_back(static_cast<int32_t>(id), static_cast<float>(bias));
  }
  return out;
}

}  // namespace

std::shared_ptr<const engine::JsonSchema> compile_schema(const json& schema,
                                                         const std::string& path) {
  try {
    return engine::compile_schema_cached(schema);
  } catch (const engine::JsonSchemaError& e) {
    bad_field(e.path().empty() ? path : path + "." + e.path(), "{}", e.what());
  }
}

void read_response_format(const json& v, const std::string& path, GenerationOptions& out) {
  const json& rf = as_object(v, path);
  const json* type = field(rf, "type");
  if (!type) bad_field(path + ".type", "is required");
  const std::string& t = as_string(*type, path + ".type");
  if (t == "text") return;
  if (t == "json_object") {  // any JSON object
    out.sampling.json_schema = engine::JsonSchema::any(engine::json_type::kObject);
    return;
  }
  if (t != "json_schema") {
    bad_field(path + ".type",
              "'{}' is not supported (\"text\", \"json_object\" or \"json_schema\")", t);
  }
  const std::string js_path = path + ".json_schema";
  const json* js = field(rf, "json_schema");
  if (!js) bad_field(js_path, "is required when type is \"json_schema\"");
  as_object(*js, js_path);
  if (const json* name = field(*js, "name")) as_string(*name, js_path + ".name");
  if (const json* d = field(*js, "description")) as_string(*d, js_path + ".description");
  if (const json* strict = field(*js, "strict")) as_bool(*strict, js_path + ".strict");
  const json* schema = field(*js, "schema");
  if (!schema) bad_field(js_path + ".schema", "is required");
  out.sampling.json_schema = compile_schema(*schema, js_path + ".schema");
}

void check_json_constraint(const GenerationOptions& out, const std::string& prefix,
                           const char* min_tokens_key) {
  const bool json = out.sampling.json_schema && out.sampling.json_after.empty();
  if (!json && !out.sampling.grammar) return;
  const char* why = json ? "cannot be combined with a JSON constraint (it ends the output once "
                           "the value is complete)"
                         : "cannot be combined with a grammar constraint (it allows the end of "
                           "the output only once the output is a whole sentence)";
  if (out.stop.ignore_eos) bad_field(field_path(prefix, "ignore_eos"), "{}", why);
  if (out.stop.min_new_tokens > 0) bad_field(field_path(prefix, min_tokens_key), "{}", why);
}

std::string read_grammar_fields(const json& obj, const std::string& prefix, const char* json_key,
                                GenerationOptions& out) {
  struct Field {
    const char* key;
    engine::GrammarDialect dialect;
  };
  static constexpr Field kFields[] = {{"regex", engine::GrammarDialect::kRegex},
                                      {"ebnf", engine::GrammarDialect::kEbnf},
                                      {"grammar", engine::GrammarDialect::kGbnf}};
  std::string taken;
  for (const Field& f : kFields) {
    const json* v = field(obj, f.key);
    if (v == nullptr || v->is_null()) continue;
    const std::string path = field_path(prefix, f.key);
    if (!taken.empty()) {
      bad_field(path, "and {} are two constraints; give one", field_path(prefix, taken.c_str()));
    }
    if (out.sampling.json_schema) {
      bad_field(path, "and {} are two constraints; give one", field_path(prefix, json_key));
    }
    const std::string& text = as_string(*v, path);
    try {
      out.sampling.grammar = engine::compile_grammar_cached(f.dialect, text);
    } catch (const engine::GrammarError& e) {
      bad_field(path, "{}", e.what());
    } catch (const engine::ConstraintBudgetExceeded& e) {
      bad_field(path, "needs too much work to compile: {}", e.what());
    }
    taken = f.key;
  }
  return taken;
}

void read_max_tokens(const json& obj, const char* key, const std::string& prefix,
                     GenerationOptions& out) {
  if (!field(obj, key)) return;
  out.stop.max_new_tokens = static_cast<int>(int_field(obj, key, prefix, 0, 0, kIntMax));
  out.max_new_tokens_given = true;
  out.max_tokens_field = field_path(prefix, key);
}

void read_common_sampling(const json& obj, const std::string& prefix, const ParseLimits& limits,
                          GenerationOptions& out) {
  auto& s = out.sampling;
  s.temperature = number_field(obj, "temperature", prefix, s.temperature, 0.0, 100.0);
  if (const json* v = field(obj, "top_p")) {
    std::string path = field_path(prefix, "top_p");
    double p = as_number(*v, path);
    if (!(p > 0.0 && p <= 1.0)) bad_field(path, "must be in (0, 1], got {}", p);
    s.top_p = p;
  }
  if (const json* v = field(obj, "top_k")) {
    std::string path = field_path(prefix, "top_k");
    int64_t k = as_int(*v, path);
    if (k < -1 || k > kIntMax) bad_field(path, "must be -1 (off) or a positive integer, got {}", k);
    s.top_k = static_cast<int>(k);
  }
  s.min_p = number_field(obj, "min_p", prefix, s.min_p, 0.0, 1.0);
  s.frequency_penalty =
      number_field(obj, "frequency_penalty", prefix, s.frequency_penalty, -2.0, 2.0);
  s.presence_penalty = number_field(obj, "presence_penalty", prefix, s.presence_penalty, -2.0, 2.0);
  if (const json* v = field(obj, "repetition_penalty")) {
    std::string path = field_path(prefix, "repetition_penalty");
    double r = as_number(*v, path);
    if (!(r > 0.0 && r <= 2.0)) bad_field(path, "must be in (0, 2], got {}", r);
    s.repetition_penalty = r;
  }
  for (const char* key : {"seed", "sampling_seed"}) {
    if (const json* v = field(obj, key)) {
      std::string path = field_path(prefix, key);
      int64_t seed = as_int(*v, path);
      s.seed = static_cast<uint64_t>(seed);
    }
  }
  if (const json* v = field(obj, "stop")) {
    const std::string path = field_path(prefix, "stop");
    out.stop.stop_strings = as_string_list(*v, path);
    check_stop_strings(out.stop.stop_strings, limits, path);
  }
  if (const json* v = field(obj, "stop_token_ids")) {
    out.stop.stop_token_ids =
        as_token_ids(*v, field_path(prefix, "stop_token_ids"), limits.vocab_size);
  }
  if (const json* v = field(obj, "logit_bias")) {
    s.logit_bias = read_logit_bias(*v, field_path(prefix, "logit_bias"), limits);
  }
  out.stop.ignore_eos = bool_field(obj, "ignore_eos", prefix, out.stop.ignore_eos);
  out.skip_special_tokens = bool_field(obj, "skip_special_tokens", prefix, out.skip_special_tokens);
}

GenerationOptions parse_sglang_sampling_params(const json& obj, const ParseLimits& limits) {
  const std::string prefix = "sampling_params";
  as_object(obj, prefix);
  GenerationOptions out;
  out.stop.max_new_tokens = 128;  // SGLang's default
  static constexpr std::array<std::string_view, 22> kKnown = {"max_new_tokens",
                                                              "min_new_tokens",
                                                              "temperature",
                                                              "top_p",
                                                              "top_k",
                                                              "min_p",
                                                              "frequency_penalty",
                                                              "presence_penalty",
                                                              "repetition_penalty",
                                                              "stop",
                                                              "stop_token_ids",
                                                              "ignore_eos",
                                                              "skip_special_tokens",
                                                              "n",
                                                              "seed",
                                                              "sampling_seed",
                                                              "spaces_between_special_tokens",
                                                              "logit_bias",
                                                              "json_schema",
                                                              "regex",
                                                              "ebnf",
                                                              "grammar"};
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    bool known = false;
    for (auto k : kKnown) known = known || it.key() == k;
    if (known || it.key() == "stream_interval") continue;  // kiln streams every step anyway
    if (is_inert_unsupported(it.key(), it.value())) continue;
    bad_field(field_path(prefix, it.key().c_str()), "is not a supported sampling parameter");
  }
  read_max_tokens(obj, "max_new_tokens", prefix, out);
  out.stop.min_new_tokens = static_cast<int>(
      int_field(obj, "min_new_tokens", prefix, 0, 0, std::numeric_limits<int32_t>::max()));
  if (out.stop.min_new_tokens > out.stop.max_new_tokens) {
    bad_field(field_path(prefix, "min_new_tokens"), "({}) must not exceed max_new_tokens ({})",
              out.stop.min_new_tokens, out.stop.max_new_tokens);
  }
  read_common_sampling(obj, prefix, limits, out);
  out.n = static_cast<int>(int_field(obj, "n", prefix, 1, 1, limits.max_n));
  if (const json* v = field(obj, "spaces_between_special_tokens")) {
    as_bool(*v, field_path(prefix, "spaces_between_special_tokens"));
  }
  if (const json* v = field(obj, "json_schema")) {
    // SGLang takes the schema as JSON text.
    const std::string path = field_path(prefix, "json_schema");
    const std::string& text = as_string(*v, path);
    out.sampling.json_schema = compile_schema(parse_json_text(text, path), path);
  }
  read_grammar_fields(obj, prefix, "json_schema", out);
  check_json_constraint(out, prefix, "min_new_tokens");
  if (const json* v = field(obj, "stream_interval")) {
    int64_t si = as_int(*v, field_path(prefix, "stream_interval"));
    if (si < 1) bad_field(field_path(prefix, "stream_interval"), "must be >= 1, got {}", si);
  }
  return out;
}

}  // namespace kiln::server
