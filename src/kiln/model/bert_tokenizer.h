// The WordPiece tokenizer of a BERT checkpoint's tokenizer.json, exact to Hugging Face
// `tokenizers` (the reference sentence-transformers uses), not to llama.cpp's WPM (which
// tokenizer_wpm.cc follows for GGUF vocabularies; the two differ on Hangul, combining marks and
// unassigned code points). The pipeline, as `tokenizers` runs it:
//  1. added tokens ([CLS], [SEP], ...) are matched in the raw text, leftmost then longest, and
//     become their ids; the text between them goes through 2-4;
//  2. BertNormalizer: clean_text drops NUL, U+FFFD and control/format/private-use characters
//     and turns whitespace into spaces; handle_chinese_chars makes CJK ideographs words of
//     their own; strip_accents (default: as lowercase) decomposes to NFD and drops nonspacing
//     marks; lowercase maps each character on its own (full mapping, no final sigma);
//  3. BertPreTokenizer: split at whitespace, punctuation characters are words of their own;
//  4. WordPiece: each word cut greedily into the longest vocabulary pieces from the left
//     (continuations carry the "##" prefix); a word with a part no piece covers, or longer than
//     max_input_chars_per_word characters, is [UNK] whole.
// The post-processor (TemplateProcessing or BertProcessing) puts [CLS] before and [SEP] after;
// truncation cuts the text's tokens so that the whole fits max_tokens.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kiln/model/encoder_tokenizer.h"

namespace kiln::model {

class BertTokenizer final : public EncoderTokenizer {
 public:
  // Throws kiln::Error naming what tokenizer.json has that this class does not implement.
  static BertTokenizer from_json(const nlohmann::json& tokenizer_json);

  // The text's token ids, without the template's special tokens.
  std::vector<int32_t> encode(std::string_view text) const override;
  // The template around `ids` ([CLS] ids [SEP]), ids cut from the end first so that the
  // result has at most max_tokens ids (no cut when max_tokens is 0).
  std::vector<int32_t> add_specials(std::vector<int32_t> ids, size_t max_tokens) const override;

  // Text of ids as `tokenizers`' WordPiece decoder writes it: pieces joined by spaces, "##"
  // continuations glued to the piece before. skip_special leaves out the added tokens.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special) const override;

  size_t vocab_size() const override { return tokens_.size(); }
  size_t special_count() const override { return prefix_.size() + suffix_.size(); }
  const std::string& token(int32_t id) const { return tokens_.at(static_cast<size_t>(id)); }

 private:
  struct Added {
    std::string content;
    int32_t id;
  };

  void encode_segment(std::string_view text, std::vector<int32_t>& out) const;
  std::u32string normalize(std::string_view text) const;
  void encode_word(const std::u32string& word, std::vector<int32_t>& out) const;

  std::vector<std::string> tokens_;
  std::unordered_map<std::string, int32_t> ids_;
  std::vector<Added> added_;  // matched in the raw text
  int32_t unk_id_ = 0;
  std::string continuation_ = "##";
  size_t max_word_chars_ = 100;
  bool clean_text_ = true;
  bool chinese_chars_ = true;
  bool strip_accents_ = true;
  bool lowercase_ = true;
  std::vector<int32_t> prefix_;  // the template's ids before the text
  std::vector<int32_t> suffix_;  // and after it
};

}  // namespace kiln::model
