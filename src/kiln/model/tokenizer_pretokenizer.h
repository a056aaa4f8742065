// Splits text into the words a byte-level BPE merges within, by the regex a model was trained
// with (PCRE2, UTF + UCP so that \p{L}, \p{N} and \s are Unicode-aware).
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::model {

// The regexes of the pre-tokenizers kiln supports, as HF tokenizer.json files give them.
enum class PreTokenizerKind { kGpt2, kLlama3, kQwen2 };

// The regex of a kind, as tokenizer.json files spell it.
std::string_view pretokenizer_regex(PreTokenizerKind kind);

class PreTokenizer {
 public:
  explicit PreTokenizer(PreTokenizerKind kind);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Every byte of `text` ends up in exactly one word, in order. Bytes the regex cannot match
  // (ill-formed UTF-8) form words of their own.
  std::vector<std::string_view> split(std::string_view text) const;

 private:
  struct Compiled;
  std::unique_ptr<Compiled> compiled_;
};

}  // namespace kiln::model
