// Embeddings from a generative model, through its engine (`kiln serve --embeddings last|mean`):
// texts are tokenized as prompts (BOS as the model adds it), cut to the context when truncating,
// and embedded by engine::Engine::embed between generation steps (normalized, as OpenAI's
// embeddings are).
#pragma once
#include "kiln/engine/engine.h"
#include "kiln/server/backend.h"
#include "kiln/server/embedding_backend.h"

namespace kiln::server {

class EngineEmbeddingBackend final : public EmbeddingBackend {
 public:
  EngineEmbeddingBackend(engine::Engine& engine, const TextCodec& codec, int64_t dimensions,
                         int64_t context, bool mean)
      : engine_(engine), codec_(codec), dimensions_(dimensions), context_(context), mean_(mean) {}
  int64_t dimensions() const override { return dimensions_; }
  size_t max_tokens() const override { return static_cast<size_t>(context_); }
  int64_t vocab_size() const override { return codec_.vocab_size(); }
  std::vector<int32_t> tokenize(std::string_view text, bool truncate) const override {
    std::vector<int32_t> ids = codec_.encode(text, /*add_special=*/true);
    if (truncate && static_cast<int64_t>(ids.size()) > context_)
      ids.resize(static_cast<size_t>(context_));
    return ids;
  }
  std::vector<float> embed(const std::vector<std::vector<int32_t>>& inputs) override {
    return engine_.embed(inputs, mean_, /*normalize=*/true);
  }

 private:
  engine::Engine& engine_;
  const TextCodec& codec_;
  int64_t dimensions_;
  int64_t context_;
  bool mean_;
};

}  // namespace kiln::server
