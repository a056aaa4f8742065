#include "kiln/server/json_fields.h"

#include <cmath>

#include "kiln/base/bounded_json.h"
#include "kiln/server/http_error.h"

namespace kiln::server {

namespace {

const char* type_name(const json& v) {
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "a list";
  if (v.is_object()) return "an object";
  return "null";
}

}  // namespace

std::string field_path(const std::string& prefix, const char* key) {
  return prefix.empty() ? std::string(key) : prefix + "." + key;
}

const json* field(const json& object, const char* key) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

int64_t as_int(const json& v, const std::string& path) {
  if (v.is_number_unsigned()) {
    // Above INT64_MAX cannot be a sensible value for any field; reject before it wraps.
    if (v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) bad_field(path, "is too large");
    return static_cast<int64_t>(v.get<uint64_t>());
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    // JSON has one number type; clients in loosely typed languages send 16.0 for 16.
    double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15) {
      return static_cast<int64_t>(d);
    }
    bad_field(path, "must be an integer, got {}", d);
  }
  bad_field(path, "must be an integer, got {}", type_name(v));
}

double as_number(const json& v, const std::string& path) {
  if (!v.is_number()) bad_field(path, "must be a number, got {}", type_name(v));
  return v.get<double>();
}

bool as_bool(const json& v, const std::string& path) {
  if (!v.is_boolean()) bad_field(path, "must be a boolean, got {}", type_name(v));
  return v.get<bool>();
}

const std::string& as_string(const json& v, const std::string& path) {
  if (!v.is_string()) bad_field(path, "must be a string, got {}", type_name(v));
  return v.get_ref<const std::string&>();
}

namespace {

template <typename Json, typename Parse>
Json parse_text(const std::string& text, const std::string& path, Parse parse) {
  try {
    Json value = parse(text);
    if (value.is_discarded()) bad_field(path, "is not valid JSON text");
    return value;
  } catch (const JsonTooDeep& e) {
    bad_field(path, "{}", e.what());
  }
}

}  // namespace

json parse_json_text(const std::string& text, const std::string& path) {
  return parse_text<json>(text, path, [](const std::string& t) { return parse_json_bounded(t); });
}

nlohmann::ordered_json parse_ordered_json_text(const std::string& text, const std::string& path) {
  return parse_text<nlohmann::ordered_json>(
      text, path, [](const std::string& t) { return parse_ordered_json_bounded(t); });
}

const json& as_object(const json& v, const std::string& path) {
  if (!v.is_object()) bad_field(path, "must be an object, got {}", type_name(v));
  return v;
}

const json& as_array(const json& v, const std::string& path) {
  if (!v.is_array()) bad_field(path, "must be a list, got {}", type_name(v));
  return v;
}

std::vector<std::string> as_string_list(const json& v, const std::string& path) {
  if (v.is_string()) return {v.get<std::string>()};
  if (!v.is_array()) bad_field(path, "must be a string or a list of strings, got {}", type_name(v));
  std::vector<std::string> out;
  for (size_t i = 0; i < v.size(); ++i) {
    std::string item = as_string(v[i], fmt::format("{}[{}]", path, i));
    if (item.empty()) bad_field(fmt::format("{}[{}]", path, i), "must not be empty");
    out.push_back(std::move(item));
  }
  return out;
}

std::vector<int32_t> as_token_ids(const json& v, const std::string& path, int64_t vocab_size) {
  if (!v.is_array()) bad_field(path, "must be a list of token ids, got {}", type_name(v));
  std::vector<int32_t> out;
  out.reserve(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    std::string item_path = fmt::format("{}[{}]", path, i);
    if (!v[i].is_number_integer()) {
      bad_field(item_path, "must be an integer token id, got {}", type_name(v[i]));
    }
    int64_t id = as_int(v[i], item_path);
    if (id < 0 || id >= vocab_size) {
      bad_field(item_path, "= {} is not a token id (vocabulary size {})", id, vocab_size);
    }
    out.push_back(static_cast<int32_t>(id));
  }
  return out;
}

int64_t int_field(const json& obj, const char* key, const std::string& prefix, int64_t fallback,
                  int64_t lo, int64_t hi) {
  const json* v = field(obj, key);
  if (!v) return fallback;
  std::string path = field_path(prefix, key);
  int64_t x = as_int(*v, path);
  if (x < lo || x > hi) bad_field(path, "must be in [{}, {}], got {}", lo, hi, x);
  return x;
}

double number_field(const json& obj, const char* key, const std::string& prefix, double fallback,
                    double lo, double hi) {
  const json* v = field(obj, key);
  if (!v) return fallback;
  std::string path = field_path(prefix, key);
  double x = as_number(*v, path);
  if (!(x >= lo && x <= hi)) bad_field(path, "must be in [{}, {}], got {}", lo, hi, x);
  return x;
}

bool bool_field(const json& obj, const char* key, const std::string& prefix, bool fallback) {
  const json* v = field(obj, key);
  return v ? as_bool(*v, field_path(prefix, key)) : fallback;
}

}  // namespace kiln::server
