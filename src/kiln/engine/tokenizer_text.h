// model::Tokenizer as the engine's TokenText: decode, end-of-generation ids, and each token's
// raw bytes for streaming (TokenText::stream; a generated leading space is kept).
#pragma once
#include "kiln/engine/token_text.h"
#include "kiln/model/tokenizer.h"

namespace kiln::engine {

class TokenizerText : public TokenText {
 public:
  explicit TokenizerText(const model::Tokenizer& tokenizer) : tokenizer_(&tokenizer) {}
  std::string decode(std::span<const int32_t> ids, bool skip_special) const override;
  bool is_end_of_generation(int32_t id) const override;
  int64_t vocab_size() const override;
  void append_token_text(int32_t id, bool skip_special, std::string& out) const override;
  std::optional<std::string> token_bytes(int32_t id) const override;

 private:
  const model::Tokenizer* tokenizer_;
};

}  // namespace kiln::engine
