// The model's Tokenizer seen through the engine's TokenText interface.
#pragma once
#include "kiln/engine/token_text.h"
#include "kiln/model/tokenizer.h"

namespace kiln::engine {

class TokenizerText : public TokenText {
 public:
  explicit TokenizerText(const model::Tokenizer& tokenizer) : tokenizer_(tokenizer) {}
  std::string decode(std::span<const int32_t> ids, bool skip_special) const override {
    return tokenizer_.decode(std::vector<int32_t>(ids.begin(), ids.end()), skip_special);
  }
  bool is_end_of_generation(int32_t id) const override { return tokenizer_.is_end_of_generation(id); }
  int64_t vocab_size() const override { return tokenizer_.vocab_size(); }

 private:
  const model::Tokenizer& tokenizer_;
};

}  // namespace kiln::engine
