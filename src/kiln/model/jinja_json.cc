#include "kiln/model/jinja_json.h"

namespace kiln::model {
namespace {

// Text from a request is valid UTF-8 (the body parsed as JSON); anything else (a caller's bytes)
// becomes U+FFFD rather than an exception, as Python strings cannot hold it either.
constexpr auto kReplace = nlohmann::ordered_json::error_handler_t::replace;

void newline(std::string& out, int indent, int level) {
  out += '\n';
  out.append(static_cast<size_t>(indent * level), ' ');
}

void write(const nlohmann::ordered_json& v, std::string& out, int indent, int level) {
  const bool container = v.is_object() || v.is_array();
  if (container && v.empty()) {
    out += v.is_object() ? "{}" : "[]";
    return;
  }
  if (container) {
    out += v.is_object() ? '{' : '[';
    bool first = true;
    for (const auto& [key, item] : v.items()) {
      if (!first) out += indent >= 0 ? "," : ", ";
      first = false;
      if (indent >= 0) newline(out, indent, level + 1);
      if (v.is_object()) {
        out += nlohmann::ordered_json(key).dump(-1, ' ', false, kReplace);
        out += ": ";
      }
      write(item, out, indent, level + 1);
    }
    if (indent >= 0) newline(out, indent, level);
    out += v.is_object() ? '}' : ']';
    return;
  }
  // Scalars: nlohmann escapes strings as json.dumps(ensure_ascii=False) does (\n, \", \\,
  // \u00XX for other control characters) and writes floats as the shortest round trip, as
  // Python's repr does ("1.0", "1e-05").
  out += v.dump(-1, ' ', false, kReplace);
}

}  // namespace

std::string jinja_tojson(const nlohmann::ordered_json& value, int indent) {
  std::string out;
  write(value, out, indent, 0);
  return out;
}

}  // namespace kiln::model
