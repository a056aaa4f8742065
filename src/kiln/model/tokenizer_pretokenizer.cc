#define PCRE2_CODE_UNIT_WIDTH 8
#include "kiln/model/tokenizer_pretokenizer.h"

#include <pcre2.h>

#include "kiln/base/error.h"
#include "kiln/model/tokenizer_utf8.h"

namespace kiln::model {

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

namespace {

struct MatchData {
  pcre2_match_data* md = nullptr;
  ~MatchData() { pcre2_match_data_free(md); }
};

}  // namespace

PreTokenizer::PreTokenizer(const std::vector<std::string>& regexes) {
  KILN_CHECK(!regexes.empty(), "pre-tokenizer has no regex");
  for (const std::string& pattern : regexes) {
    auto c = std::make_unique<Compiled>();
    int error = 0;
    PCRE2_SIZE offset = 0;
    // MATCH_INVALID_UTF: ill-formed input is not an error; such bytes simply never match.
    // DOLLAR_ENDONLY: $ is the end of the word only, as in the std::regex llama.cpp uses (PCRE2
    // would otherwise also match before a final newline).
    c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                            PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY,
                            &error, &offset, nullptr);
    if (c->code == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof(message));
      fail("pre-tokenizer regex does not compile at {}: {} ({})", offset,
           reinterpret_cast<const char*>(message), pattern);
    }
    // JIT is an optimization only; the interpreter gives the same matches where it is missing.
    pcre2_jit_compile(c->code, PCRE2_JIT_COMPLETE);
    compiled_.push_back(std::move(c));
  }
}

PreTokenizer::~PreTokenizer() = default;

void PreTokenizer::split_one(const Compiled& re, std::string_view word, void* match_data,
                             std::vector<std::string_view>& out) const {
  auto* md = static_cast<pcre2_match_data*>(match_data);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(word.data());
  size_t piece = 0;   // start of the text not yet emitted
  size_t search = 0;  // where the next match may start
  while (search < word.size()) {
    const int rc = pcre2_match(re.code, subject, word.size(), search, 0, md, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    KILN_CHECK(rc >= 0, "pre-tokenizer regex failed with PCRE2 error {}", rc);
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t start = ov[0], end = ov[1];
    if (start > piece) out.push_back(word.substr(piece, start - piece));  // between matches
    piece = start;
    if (end == start) {  // a cut only; the next search starts one character on
      const size_t len = utf8_sequence_length(word.substr(start));
      search = start + (len == 0 ? 1 : len);
      continue;
    }
    out.push_back(word.substr(start, end - start));
    piece = search = end;
  }
  if (piece < word.size()) out.push_back(word.substr(piece));
}

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string_view> words;
  if (text.empty()) return words;
  words.push_back(text);
  std::vector<std::string_view> next;
  for (const std::unique_ptr<Compiled>& re : compiled_) {
    MatchData md{pcre2_match_data_create_from_pattern(re->code, nullptr)};
    KILN_CHECK(md.md != nullptr, "out of memory in the pre-tokenizer");
    next.clear();
    for (std::string_view word : words) split_one(*re, word, md.md, next);
    words.swap(next);
  }
  return words;
}

}  // namespace kiln::model
