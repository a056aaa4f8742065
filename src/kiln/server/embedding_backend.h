// What the embedding routes (/v1/embeddings, /encode) need from the model: its tokenizer and
// limits, and a call that turns model inputs into vectors. Kept apart from GenerationBackend so
// that the routes and their request parsing are tested against a fake without weights.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

namespace kiln::server {

class EmbeddingBackend {
 public:
  virtual ~EmbeddingBackend() = default;
  virtual int64_t dimensions() const = 0;
  // Tokens of one input at most (the model's template tokens included).
  virtual size_t max_tokens() const = 0;
  virtual int64_t vocab_size() const = 0;
  // A text's model input ([CLS] ... [SEP] for BERT): cut to max_tokens() when `truncate`, else
  // whole (the route refuses it when it is longer).
  virtual std::vector<int32_t> tokenize(std::string_view text, bool truncate) const = 0;
  // One vector per input, row-major [inputs, dimensions]. Inputs are non-empty, at most
  // max_tokens() ids each, all within the vocabulary. Safe to call from several threads.
  virtual std::vector<float> embed(const std::vector<std::vector<int32_t>>& inputs) = 0;
};

}  // namespace kiln::server
