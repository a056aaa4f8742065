// What a sentence encoder needs of its tokenizer: a text's ids, the model's template around
// them ([CLS] ... [SEP]) with truncation, and text back. Two implement it: BertTokenizer
// (tokenizer.json, exact to Hugging Face `tokenizers`) and the GGUF vocabulary's tokenizer
// (llama.cpp's WPM, for GGUF encoder files: an adapter over tokenizer.h in sentence_encoder.cc).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::model {

class EncoderTokenizer {
 public:
  virtual ~EncoderTokenizer() = default;
  // The text's token ids, without the template's special tokens.
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // The template around `ids`, ids cut from the end first so that the result has at most
  // max_tokens ids (no cut when max_tokens is 0).
  virtual std::vector<int32_t> add_specials(std::vector<int32_t> ids, size_t max_tokens) const = 0;
  std::vector<int32_t> encode_for_model(std::string_view text, size_t max_tokens) const {
    return add_specials(encode(text), max_tokens);
  }
  virtual std::string decode(const std::vector<int32_t>& ids, bool skip_special) const = 0;
  virtual size_t vocab_size() const = 0;
  // Ids the template adds.
  virtual size_t special_count() const = 0;
};

}  // namespace kiln::model
