#include "kiln/server/embedding_request.h"

#include <limits>

#include "kiln/server/http_error.h"

namespace kiln::server {
namespace {

using nlohmann::json;

bool is_id(const json& v) { return v.is_number_integer(); }

std::vector<int32_t> read_ids(const json& list, const std::string& field) {
  std::vector<int32_t> ids;
  ids.reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    const json& v = list[i];
    if (!is_id(v)) bad_field(field, "must hold only token ids (integers); item {} is not", i);
    const auto id = v.get<int64_t>();
    if (id < 0 || id > std::numeric_limits<int32_t>::max())
      bad_field(field, "holds token id {}, which is out of range", id);
    ids.push_back(static_cast<int32_t>(id));
  }
  if (ids.empty()) bad_field(field, "is an empty list of token ids");
  return ids;
}

EmbeddingInput text_input(const json& v, const std::string& field) {
  if (!v.is_string()) bad_field(field, "must be a string");
  EmbeddingInput in;
  in.text = v.get<std::string>();
  if (in.text.empty()) bad_field(field, "is an empty string; there is nothing to embed");
  return in;
}

EmbeddingInput ids_input(const json& v, const std::string& field) {
  EmbeddingInput in;
  in.is_text = false;
  in.ids = read_ids(v, field);
  return in;
}

// A string, a list of strings, a list of ids or a list of lists of ids.
void read_inputs(const json& v, const std::string& field, size_t max_inputs, EmbeddingRequest& r) {
  if (v.is_string()) {
    r.inputs.push_back(text_input(v, field));
    r.single = true;
    return;
  }
  if (!v.is_array())
    bad_field(field,
              "must be a string, a list of strings, a list of token ids or a list of "
              "lists of token ids");
  if (v.empty()) bad_field(field, "is an empty list; there is nothing to embed");
  if (is_id(v[0])) {
    r.inputs.push_back(ids_input(v, field));
    r.single = true;
    return;
  }
  if (v.size() > max_inputs)
    bad_field(field, "holds {} inputs; one request may hold at most {}", v.size(), max_inputs);
  const bool texts = v[0].is_string();
  if (!texts && !v[0].is_array())
    bad_field(field,
              "must be a string, a list of strings, a list of token ids or a list of "
              "lists of token ids");
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string item = field + "[" + std::to_string(i) + "]";
    if (texts) {
      r.inputs.push_back(text_input(v[i], item));
    } else if (v[i].is_array()) {
      r.inputs.push_back(ids_input(v[i], item));
    } else {
      bad_field(item, "must be {} like the first item", texts ? "a string" : "a list of token ids");
    }
  }
}

void read_truncate(const json& body, EmbeddingRequest& r) {
  if (!body.contains("truncate")) return;
  if (!body["truncate"].is_boolean()) bad_field("truncate", "must be true or false");
  r.truncate = body["truncate"].get<bool>();
}

void require_object(const json& body) {
  if (!body.is_object()) throw HttpError(400, "the request body must be a JSON object");
}

}  // namespace

EmbeddingRequest parse_openai_embedding_request(const json& body, size_t max_inputs) {
  require_object(body);
  EmbeddingRequest r;
  if (!body.contains("input")) bad_field("input", "is required");
  read_inputs(body["input"], "input", max_inputs, r);
  if (body.contains("encoding_format") && !body["encoding_format"].is_null()) {
    const json& f = body["encoding_format"];
    if (!f.is_string() || (f != "float" && f != "base64"))
      bad_field("encoding_format", "must be \"float\" or \"base64\"");
    r.base64 = f == "base64";
  }
  if (body.contains("dimensions") && !body["dimensions"].is_null()) {
    if (!body["dimensions"].is_number_integer()) bad_field("dimensions", "must be an integer");
    r.dimensions = body["dimensions"].get<int64_t>();
  }
  if (body.contains("model") && !body["model"].is_null() && !body["model"].is_string())
    bad_field("model", "must be a string");
  read_truncate(body, r);
  return r;
}

EmbeddingRequest parse_native_embedding_request(const json& body, size_t max_inputs) {
  require_object(body);
  EmbeddingRequest r;
  const bool text = body.contains("text") && !body["text"].is_null();
  const bool ids = body.contains("input_ids") && !body["input_ids"].is_null();
  if (text == ids) throw HttpError(400, "give exactly one of text and input_ids", "text");
  if (text) {
    const json& t = body["text"];
    if (!t.is_string() && !(t.is_array() && (t.empty() || t[0].is_string())))
      bad_field("text", "must be a string or a list of strings");
    read_inputs(t, "text", max_inputs, r);
  } else {
    const json& t = body["input_ids"];
    if (!t.is_array() || (!t.empty() && !is_id(t[0]) && !t[0].is_array()))
      bad_field("input_ids", "must be a list of token ids or a list of such lists");
    read_inputs(t, "input_ids", max_inputs, r);
  }
  read_truncate(body, r);
  return r;
}

}  // namespace kiln::server
