// JSON text as chat templates write it with `| tojson`: transformers' filter is Python's
// json.dumps(x, ensure_ascii=False), so ", " and ": " separators, keys in the order given,
// non-ASCII characters as they are. Rendering tools and tool-call arguments byte for byte as
// the publishers' templates do needs exactly this text, which nlohmann's dump() does not write.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

namespace kiln::model {

// `value` keeps its keys in the order the client sent them (ordered_json), as Python dicts do.
// indent >= 0: `| tojson(indent=N)`, one member per line (Python then separates with "," and
// ": "; empty objects and arrays stay "{}" and "[]").
std::string jinja_tojson(const nlohmann::ordered_json& value, int indent = -1);

}  // namespace kiln::model
