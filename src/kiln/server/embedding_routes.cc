#include "kiln/server/embedding_routes.h"

#include <cstring>
#include <string>

#include "kiln/server/embedding_backend.h"
#include "kiln/server/embedding_request.h"
#include "kiln/server/http_error.h"

namespace kiln::server {
namespace {

using nlohmann::json;

// The float32 values' little-endian bytes in standard base64 (what OpenAI's
// encoding_format=base64 returns and its client decodes with numpy.frombuffer).
std::string base64_floats(const float* v, size_t n) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(n * sizeof(float), '\0');
  std::memcpy(bytes.data(), v, bytes.size());  // x86-64 is little-endian
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    const uint32_t w = static_cast<uint8_t>(bytes[i]) << 16 |
                       static_cast<uint8_t>(bytes[i + 1]) << 8 | static_cast<uint8_t>(bytes[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out.push_back(kAlphabet[(w >> s) & 63]);
  }
  if (i < bytes.size()) {
    const bool two = i + 1 < bytes.size();
    const uint32_t w =
        static_cast<uint8_t>(bytes[i]) << 16 | (two ? static_cast<uint8_t>(bytes[i + 1]) << 8 : 0);
    out.push_back(kAlphabet[(w >> 18) & 63]);
    out.push_back(kAlphabet[(w >> 12) & 63]);
    out.push_back(two ? kAlphabet[(w >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

EmbeddingBackend& backend_for(ServerState& st, const std::string& route) {
  if (st.embeddings == nullptr)
    throw HttpError(404, route + " is not served: the loaded model '" + st.model.id +
                             "' is a text generation model, not an embedding model (serve a "
                             "sentence-embedding folder such as all-minilm-l6-v2, or start "
                             "kiln serve with --embeddings last|mean to embed with this "
                             "model's hidden states)");
  return *st.embeddings;
}

struct Embedded {
  std::vector<float> vectors;   // [inputs, dimensions]
  std::vector<int64_t> tokens;  // per input
  int64_t total_tokens = 0;
};

// Tokenizes and checks every input, then embeds them all in one call.
Embedded run(EmbeddingBackend& b, const EmbeddingRequest& r, const std::string& field) {
  std::vector<std::vector<int32_t>> inputs;
  inputs.reserve(r.inputs.size());
  Embedded out;
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    const EmbeddingInput& in = r.inputs[i];
    const std::string name = r.single ? field : field + "[" + std::to_string(i) + "]";
    std::vector<int32_t> ids = in.is_text ? b.tokenize(in.text, r.truncate) : in.ids;
    if (ids.size() > b.max_tokens())
      bad_field(name, "is {} tokens long; the model takes at most {}{}", ids.size(), b.max_tokens(),
                in.is_text ? " (send \"truncate\": true to cut it)" : "");
    for (int32_t id : ids)
      if (id >= b.vocab_size())
        bad_field(name, "holds token id {}, outside the vocabulary of {}", id, b.vocab_size());
    out.tokens.push_back(static_cast<int64_t>(ids.size()));
    out.total_tokens += static_cast<int64_t>(ids.size());
    inputs.push_back(std::move(ids));
  }
  out.vectors = b.embed(inputs);
  return out;
}

std::vector<float> row(const Embedded& e, size_t i, int64_t dim) {
  const float* p = e.vectors.data() + i * static_cast<size_t>(dim);
  return {p, p + dim};
}

}  // namespace

void add_embedding_routes(Router& router, ServerState& st) {
  router.post("/v1/embeddings", [&st](const HttpRequest& req, HttpResponse& res) {
    EmbeddingBackend& b = backend_for(st, "/v1/embeddings");
    const EmbeddingRequest r = parse_openai_embedding_request(
        parse_json_body(req), static_cast<size_t>(st.options.max_batch_prompts));
    if (r.dimensions && *r.dimensions != b.dimensions())
      bad_field("dimensions", "{} is not supported: the model's embeddings have {} dimensions",
                *r.dimensions, b.dimensions());
    const Embedded e = run(b, r, "input");
    json data = json::array();
    for (size_t i = 0; i < r.inputs.size(); ++i) {
      json item = {{"object", "embedding"}, {"index", i}};
      if (r.base64) {
        item["embedding"] = base64_floats(e.vectors.data() + i * b.dimensions(),
                                          static_cast<size_t>(b.dimensions()));
      } else {
        item["embedding"] = row(e, i, b.dimensions());
      }
      data.push_back(std::move(item));
    }
    set_json(res,
             {{"object", "list"},
              {"data", std::move(data)},
              {"model", st.model.id},
              {"usage", {{"prompt_tokens", e.total_tokens}, {"total_tokens", e.total_tokens}}}});
  });
  router.post("/encode", [&st](const HttpRequest& req, HttpResponse& res) {
    EmbeddingBackend& b = backend_for(st, "/encode");
    const json body = parse_json_body(req);
    const EmbeddingRequest r =
        parse_native_embedding_request(body, static_cast<size_t>(st.options.max_batch_prompts));
    const bool text = body.contains("text") && !body["text"].is_null();
    const Embedded e = run(b, r, text ? "text" : "input_ids");
    json out = json::array();
    for (size_t i = 0; i < r.inputs.size(); ++i) {
      out.push_back({{"embedding", row(e, i, b.dimensions())},
                     {"meta_info",
                      {{"id", std::to_string(i)},
                       {"prompt_tokens", e.tokens[i]},
                       {"finish_reason", {{"type", "length"}, {"length", 0}}}}}});
    }
    set_json(res, r.single ? out[0] : out);
  });
}

}  // namespace kiln::server
