// Splits text into the words a BPE merges within, by a sequence of regexes (a pre-tokenizer
// type of tokenizer_pretypes.h, or a tokenizer.json Split regex). PCRE2 with UTF + UCP, so that
// \p{L}, \p{N} and \s are Unicode-aware.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::model {

class PreTokenizer {
 public:
  // Throws kiln::Error when a regex does not compile.
  explicit PreTokenizer(const std::vector<std::string>& regexes);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Every byte of `text` ends up in exactly one word, in order. Each regex in turn splits every
  // word the previous ones left: its matches and the text between them (bytes it cannot match,
  // ill-formed UTF-8 among them) become words; an empty match only cuts. A regex sees one word
  // at a time (lookaheads stop at its end, $ matches there).
  std::vector<std::string_view> split(std::string_view text) const;

 private:
  struct Compiled;
  void split_one(const Compiled& re, std::string_view word, void* match_data,
                 std::vector<std::string_view>& out) const;
  std::vector<std::unique_ptr<Compiled>> compiled_;
};

}  // namespace kiln::model
