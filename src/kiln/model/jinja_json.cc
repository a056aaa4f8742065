#include "kiln/model/jinja_json.h"

namespace kiln::model {
namespace {

void write(const nlohmann::ordered_json& v, std::string& out) {
  if (v.is_object()) {
    out += '{';
    bool first = true;
    for (const auto& [key, item] : v.items()) {
      if (!first) out += ", ";
      first = false;
      out += nlohmann::ordered_json(key).dump(-1, ' ', false);
      out += ": ";
      write(item, out);
    }
    out += '}';
  } else if (v.is_array()) {
    out += '[';
    for (size_t i = 0; i < v.size(); ++i) {
      if (i > 0) out += ", ";
      write(v[i], out);
    }
    out += ']';
  } else {
    // Scalars: nlohmann escapes strings as json.dumps(ensure_ascii=False) does (\n, \", \\,
    // \u00XX for other control characters) and writes floats as the shortest round trip, as
    // Python's repr does ("1.0", "1e-05").
    out += v.dump(-1, ' ', false);
  }
}

}  // namespace

std::string jinja_tojson(const nlohmann::ordered_json& value) {
  std::string out;
  write(value, out);
  return out;
}

}  // namespace kiln::model
