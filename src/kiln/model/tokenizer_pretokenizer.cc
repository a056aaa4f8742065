#define PCRE2_CODE_UNIT_WIDTH 8
#include "kiln/model/tokenizer_pretokenizer.h"

#include <pcre2.h>

#include "kiln/base/error.h"

namespace kiln::model {
namespace {

// GPT-2 (tokenizers' ByteLevel default).
constexpr std::string_view kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Llama 3: case-insensitive contractions, digits in groups of up to three.
constexpr std::string_view kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen 2: as Llama 3 but every digit on its own.
constexpr std::string_view kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

}  // namespace

std::string_view pretokenizer_regex(PreTokenizerKind kind) {
  switch (kind) {
    case PreTokenizerKind::kGpt2:
      return kGpt2Regex;
    case PreTokenizerKind::kLlama3:
      return kLlama3Regex;
    case PreTokenizerKind::kQwen2:
      return kQwen2Regex;
  }
  fail("unknown pre-tokenizer kind {}", static_cast<int>(kind));
}

struct PreTokenizer::Compiled {
  pcre2_code* code = nullptr;
  ~Compiled() { pcre2_code_free(code); }
};

PreTokenizer::PreTokenizer(PreTokenizerKind kind) : compiled_(std::make_unique<Compiled>()) {
  const std::string_view pattern = pretokenizer_regex(kind);
  int error = 0;
  PCRE2_SIZE offset = 0;
  // MATCH_INVALID_UTF: ill-formed input is not an error; such bytes simply never match.
  compiled_->code =
      pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                    PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &offset, nullptr);
  if (compiled_->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    fail("pre-tokenizer regex does not compile at {}: {}", offset,
         reinterpret_cast<const char*>(message));
  }
  // JIT is an optimization only; the interpreter gives the same matches where it is missing.
  pcre2_jit_compile(compiled_->code, PCRE2_JIT_COMPLETE);
}

PreTokenizer::~PreTokenizer() = default;

std::vector<std::string_view> PreTokenizer::split(std::string_view text) const {
  std::vector<std::string_view> words;
  if (text.empty()) return words;
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(compiled_->code, nullptr);
  KILN_CHECK(md != nullptr, "out of memory in the pre-tokenizer");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos < text.size()) {
    const int rc = pcre2_match(compiled_->code, subject, text.size(), pos, 0, md, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      pcre2_match_data_free(md);
      fail("pre-tokenizer regex failed with PCRE2 error {}", rc);
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const size_t start = ov[0], end = ov[1];
    if (start > pos) words.push_back(text.substr(pos, start - pos));  // unmatched bytes
    if (end == start) {  // the patterns cannot match empty, but never loop on it
      pos = start + 1;
      words.push_back(text.substr(start, 1));
      continue;
    }
    words.push_back(text.substr(start, end - start));
    pos = end;
  }
  if (pos < text.size()) words.push_back(text.substr(pos));
  pcre2_match_data_free(md);
  return words;
}

}  // namespace kiln::model
