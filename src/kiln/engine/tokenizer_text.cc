#include "kiln/engine/tokenizer_text.h"

#include <vector>

#include "kiln/model/incremental_decoder.h"

namespace kiln::engine {

namespace {
class DecoderStream : public TextStream {
 public:
  DecoderStream(const model::Tokenizer& tokenizer, bool skip_special)
      : decoder_(tokenizer, skip_special, /*at_text_start=*/false) {}
  std::string push(int32_t token) override { return decoder_.push(token); }
  std::string finish() override { return decoder_.finish(); }

 private:
  model::IncrementalDecoder decoder_;
};
}  // namespace

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

std::unique_ptr<TextStream> TokenizerText::stream(bool skip_special) const {
  return std::make_unique<DecoderStream>(*tokenizer_, skip_special);
}

}  // namespace kiln::engine
