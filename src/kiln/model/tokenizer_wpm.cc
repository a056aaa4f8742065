// WordPiece (BERT) as llama.cpp runs it on a GGUF vocab. The converter stores a word-initial
// piece with a U+2581 prefix ("▁hello") and a continuation piece ("##llo" in vocab.txt) bare
// ("llo"), so a word is U+2581 + its text, cut greedily into the longest pieces from the left;
// a word with any part no piece covers becomes [UNK] whole, and so does a word of more than 100
// characters (BERT's max_input_chars_per_word; llama.cpp has no such limit, HF tokenizers and
// transformers do).
//
// Before that, BertNormalizer and BertPreTokenizer: whitespace separates words; control
// characters, NUL and U+FFFD are dropped; with strip_accents every character is replaced by the
// first character of its canonical decomposition and combining marks are dropped; with
// lowercase, the simple lowercase mapping; punctuation, ASCII symbols and CJK ideographs are
// words of their own.
#include "kiln/model/tokenizer_wpm.h"

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>

#include <algorithm>

#include "kiln/base/error.h"
#include "kiln/model/tokenizer_utf8.h"

namespace kiln::model {
namespace {

constexpr std::string_view kWordPrefix = "\xE2\x96\x81";  // U+2581
constexpr size_t kMaxWordChars = 100;

// The ranges BERT calls Chinese characters (CJK ideographs; HF's table, Extension C/D start as
// it has them).
bool is_cjk_ideograph(UChar32 c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

uint32_t category_mask(UChar32 c) { return U_MASK(u_charType(c)); }
constexpr uint32_t kControl = U_GC_CC_MASK | U_GC_CF_MASK | U_GC_CO_MASK | U_GC_CS_MASK;

class WpmTokenizer final : public Tokenizer {
 public:
  explicit WpmTokenizer(TokenizerVocab vocab) : Tokenizer(std::move(vocab)) {
    KILN_CHECK(vocab_.unk_id.has_value(), "WordPiece tokenizer has no unknown-token id");
    for (const std::string& t : vocab_.tokens) max_piece_ = std::max(max_piece_, t.size());
    UErrorCode status = U_ZERO_ERROR;
    nfd_ = icu::Normalizer2::getNFDInstance(status);
    KILN_CHECK(U_SUCCESS(status), "ICU has no NFD normalizer: {}", u_errorName(status));
  }

 protected:
  void encode_fragment(std::string_view text, bool /*text_start*/,
                       std::vector<int32_t>& out) const override {
    for (const std::string& word : words(text)) encode_word(word, out);
  }

  void append_token_bytes(int32_t id, std::string& out) const override {
    std::string_view text = vocab_.tokens[id];
    if (types_[id] == TokenType::kNormal && text.substr(0, kWordPrefix.size()) == kWordPrefix) {
      out.push_back(' ');  // a word-initial piece: the word's space
      text.remove_prefix(kWordPrefix.size());
    }
    out.append(text);
  }

 private:
  // The first code point of c's canonical decomposition (c itself when it has none).
  UChar32 decomposition_head(UChar32 c) const {
    UErrorCode status = U_ZERO_ERROR;
    const icu::UnicodeString nfd = nfd_->normalize(icu::UnicodeString(c), status);
    return U_SUCCESS(status) && nfd.length() > 0 ? nfd.char32At(0) : c;
  }

  std::vector<std::string> words(std::string_view text) const {
    std::vector<std::string> words(1);
    auto finish_word = [&] {
      if (!words.back().empty()) words.emplace_back();
    };
    int32_t i = 0;
    const auto n = static_cast<int32_t>(text.size());
    while (i < n) {
      UChar32 c;
      U8_NEXT(reinterpret_cast<const uint8_t*>(text.data()), i, n, c);
      if (c < 0) c = 0xFFFD;  // ill-formed UTF-8: dropped below
      if (vocab_.strip_accents) c = decomposition_head(c);
      if (u_isUWhiteSpace(c)) {
        finish_word();
        continue;
      }
      const uint32_t cat = category_mask(c);
      if (c == 0 || c == 0xFFFD || (cat & kControl) != 0) continue;
      if (vocab_.strip_accents && (cat & U_GC_M_MASK) != 0) continue;
      const UChar32 lower = vocab_.lowercase ? u_tolower(c) : c;
      if ((cat & U_GC_P_MASK) != 0 || (c < 0x7F && (cat & U_GC_S_MASK) != 0) ||
          is_cjk_ideograph(c)) {
        finish_word();
        append_utf8(static_cast<uint32_t>(lower), words.back());
        words.emplace_back();
      } else {
        append_utf8(static_cast<uint32_t>(lower), words.back());
      }
    }
    if (words.back().empty()) words.pop_back();
    return words;
  }

  void encode_word(const std::string& word, std::vector<int32_t>& out) const {
    size_t chars = 0;
    for (char c : word) chars += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
    if (chars > kMaxWordChars) {
      out.push_back(*vocab_.unk_id);
      return;
    }
    const std::string text = std::string(kWordPrefix) + word;
    const size_t start = out.size();
    for (size_t i = 0; i < text.size();) {
      size_t len = std::min(text.size() - i, max_piece_);
      std::optional<int32_t> id;
      for (; len > 0; --len) {
        id = find_token(std::string_view(text).substr(i, len));
        if (id) break;
      }
      if (!id) {  // some part of the word is no piece: the word is unknown
        out.resize(start);
        out.push_back(*vocab_.unk_id);
        return;
      }
      out.push_back(*id);
      i += len;
    }
  }

  const icu::Normalizer2* nfd_ = nullptr;
  size_t max_piece_ = 0;
};

}  // namespace

std::unique_ptr<Tokenizer> make_wpm_tokenizer(TokenizerVocab vocab) {
  return std::make_unique<WpmTokenizer>(std::move(vocab));
}

}  // namespace kiln::model
