#include "kiln/model/incremental_decoder.h"

#include "kiln/model/tokenizer_utf8.h"

namespace kiln::model {

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special,
                                       bool at_text_start)
    : tokenizer_(tokenizer), skip_special_(skip_special), at_start_(at_text_start) {}

std::string IncrementalDecoder::push(int32_t id) {
  if (skip_special_ && tokenizer_.is_special(id)) return {};  // is_special checks the range
  const size_t before = pending_.size();
  tokenizer_.append_token_bytes_to(id, pending_);
  if (at_start_ && pending_.size() > before) {
    // Same rule as Tokenizer::decode(): the text's first visible normal token drops the space
    // that the vocab's space prefix put there.
    if (tokenizer_.add_space_prefix() && tokenizer_.token_type(id) == TokenType::kNormal &&
        pending_[before] == ' ') {
      pending_.erase(before, 1);
    }
    at_start_ = false;
  }
  std::string out;
  const size_t consumed = append_valid_utf8(pending_, /*final=*/false, out);
  pending_.erase(0, consumed);
  return out;
}

std::string IncrementalDecoder::finish() {
  std::string out;
  append_valid_utf8(pending_, /*final=*/true, out);
  pending_.clear();
  return out;
}

}  // namespace kiln::model
