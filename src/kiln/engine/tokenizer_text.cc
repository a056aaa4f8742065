#include "kiln/engine/tokenizer_text.h"

#include <vector>

namespace kiln::engine {

std::string TokenizerText::decode(std::span<const int32_t> ids, bool skip_special) const {
  return tokenizer_->decode(std::vector<int32_t>(ids.begin(), ids.end()), skip_special);
}

bool TokenizerText::is_end_of_generation(int32_t id) const {
  return tokenizer_->is_end_of_generation(id);
}

int64_t TokenizerText::vocab_size() const { return tokenizer_->vocab_size(); }

std::optional<std::string> TokenizerText::token_bytes(int32_t id) const {
  // Raw bytes, not decode(): a byte-fallback token alone is not valid UTF-8, which decode()
  // would turn into U+FFFD.
  if (tokenizer_->is_special(id)) return std::nullopt;
  std::string bytes = tokenizer_->token_bytes(id);
  if (bytes.empty()) return std::nullopt;
  return bytes;
}

void TokenizerText::append_token_text(int32_t id, bool skip_special, std::string& out) const {
  // Raw bytes (a byte-fallback token alone is half a character, which decode() would turn into
  // U+FFFD); the stream completes characters across tokens.
  if (skip_special && tokenizer_->is_special(id)) return;  // is_special checks the range
  tokenizer_->append_token_bytes_to(id, out);
}

}  // namespace kiln::engine
