// The two embedding request shapes, read into one form:
//  - OpenAI's POST /v1/embeddings: {"input": string | [string] | [int] | [[int]], "model",
//    "encoding_format": "float" | "base64", "dimensions", "user"}; kiln adds "truncate"
//    (default true: texts longer than the model's limit are cut, as sentence-transformers
//    cuts them; false: such a text is refused).
//  - SGLang's native POST /encode (EmbeddingReqInput): {"text": string | [string]} or
//    {"input_ids": [int] | [[int]]}, "rid" (ignored), "truncate" as above.
// Texts are tokenized later (the backend's tokenizer); token ids are the model input as given
// (no [CLS]/[SEP] added). Every problem is a 400 HttpError naming the field.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace kiln::server {

struct EmbeddingInput {
  bool is_text = true;
  std::string text;
  std::vector<int32_t> ids;
};

struct EmbeddingRequest {
  std::vector<EmbeddingInput> inputs;
  bool single = false;  // one input, not a list of them (/encode answers with one object)
  bool base64 = false;
  bool truncate = true;
  std::optional<int64_t> dimensions;
};

// max_inputs: the most inputs one request may hold.
EmbeddingRequest parse_openai_embedding_request(const nlohmann::json& body, size_t max_inputs);
EmbeddingRequest parse_native_embedding_request(const nlohmann::json& body, size_t max_inputs);

}  // namespace kiln::server
