#include "kiln/model/incremental_decoder.h"

#include <utility>

#include "kiln/model/tokenizer_utf8.h"

namespace kiln::model {

IncrementalDecoder::IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special,
                                       bool at_text_start)
    : append_token_([&tokenizer, skip_special](int32_t id, std::string& out) {
        if (skip_special && tokenizer.is_special(id)) return;  // is_special checks the range
        tokenizer.append_token_bytes_to(id, out);
      }),
      text_start_(at_text_start ? &tokenizer : nullptr) {}

IncrementalDecoder::IncrementalDecoder(AppendToken append_token)
    : append_token_(std::move(append_token)) {}

std::string IncrementalDecoder::push(int32_t id) {
  const size_t before = pending_.size();
  append_token_(id, pending_);
  if (text_start_ != nullptr && pending_.size() > before) {
    // Same rule as Tokenizer::decode(): the text's first visible normal token drops the space
    // that the vocab's space prefix put there.
    if (text_start_->add_space_prefix() && text_start_->token_type(id) == TokenType::kNormal &&
        pending_[before] == ' ') {
      pending_.erase(before, 1);
    }
    text_start_ = nullptr;
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
