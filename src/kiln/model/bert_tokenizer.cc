#include "kiln/model/bert_tokenizer.h"

#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/ustring.h>
#include <unicode/utf8.h>

#include <algorithm>

#include "kiln/base/error.h"
#include "kiln/model/tokenizer_utf8.h"

namespace kiln::model {
namespace {

using json = nlohmann::json;

// The ranges `tokenizers` calls Chinese characters (its is_chinese_char).
bool is_cjk_ideograph(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
         (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
         (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

uint32_t category_mask(char32_t c) { return U_MASK(u_charType(static_cast<UChar32>(c))); }

bool is_whitespace(char32_t c) {
  return c == '\t' || c == '\n' || c == '\r' || u_isUWhiteSpace(static_cast<UChar32>(c));
}

// `tokenizers`' is_control: control, format, private use and surrogates, except \t \n \r
// (whitespace there). Unassigned code points are kept (they become [UNK]).
bool is_control(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
  return (category_mask(c) & (U_GC_CC_MASK | U_GC_CF_MASK | U_GC_CO_MASK | U_GC_CS_MASK)) != 0;
}

// ASCII punctuation and symbols (Rust's is_ascii_punctuation) and Unicode's P* categories.
bool is_punctuation(char32_t c) {
  if (c < 0x80)
    return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
           (c >= 123 && c <= 126);
  return (category_mask(c) & U_GC_P_MASK) != 0;
}

std::u32string decode_utf8(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  int32_t i = 0;
  const auto n = static_cast<int32_t>(text.size());
  while (i < n) {
    UChar32 c;
    U8_NEXT(reinterpret_cast<const uint8_t*>(text.data()), i, n, c);
    out.push_back(c < 0 ? char32_t{0xFFFD} : static_cast<char32_t>(c));
  }
  return out;
}

std::string encode_utf8(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) append_utf8(c, out);
  return out;
}

// One character's full lowercase mapping on its own (Rust's char::to_lowercase, which
// `tokenizers` applies character by character: "İ" -> "i̇", a lone capital sigma -> "σ").
void append_lowercase(char32_t c, std::u32string& out) {
  if (c < 0x80) {
    out.push_back(c >= 'A' && c <= 'Z' ? c + 32 : c);
    return;
  }
  UChar src[2];
  int32_t src_len = 0;
  U16_APPEND_UNSAFE(src, src_len, static_cast<UChar32>(c));
  UChar dst[8];
  UErrorCode status = U_ZERO_ERROR;
  const int32_t len = u_strToLower(dst, 8, src, src_len, "", &status);
  if (U_FAILURE(status)) {
    out.push_back(c);
    return;
  }
  for (int32_t i = 0; i < len;) {
    UChar32 d;
    U16_NEXT(dst, i, len, d);
    out.push_back(static_cast<char32_t>(d));
  }
}

template <class T>
T get_or(const json& j, const char* key, T fallback) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? fallback : it->get<T>();
}

}  // namespace

BertTokenizer BertTokenizer::from_json(const json& tj) {
  BertTokenizer t;
  const json& model = tj.at("model");
  KILN_CHECK(model.value("type", "") == "WordPiece",
             "tokenizer.json: model type '{}' is not WordPiece", model.value("type", ""));
  const json& vocab = model.at("vocab");
  KILN_CHECK(vocab.is_object() && !vocab.empty(), "tokenizer.json: WordPiece vocab is empty");
  t.tokens_.resize(vocab.size());
  for (const auto& [piece, id_json] : vocab.items()) {
    const auto id = id_json.get<int64_t>();
    KILN_CHECK(id >= 0 && static_cast<size_t>(id) < vocab.size(),
               "tokenizer.json: token '{}' has id {} outside the vocabulary", piece, id);
    t.tokens_[static_cast<size_t>(id)] = piece;
    t.ids_.emplace(piece, static_cast<int32_t>(id));
  }
  const std::string unk = model.value("unk_token", "[UNK]");
  auto unk_it = t.ids_.find(unk);
  KILN_CHECK(unk_it != t.ids_.end(), "tokenizer.json: unk_token '{}' is not in the vocab", unk);
  t.unk_id_ = unk_it->second;
  t.continuation_ = get_or<std::string>(model, "continuing_subword_prefix", "##");
  t.max_word_chars_ = get_or<size_t>(model, "max_input_chars_per_word", 100);

  const json normalizer = tj.value("normalizer", json());
  if (!normalizer.is_null()) {
    KILN_CHECK(normalizer.value("type", "") == "BertNormalizer",
               "tokenizer.json: normalizer '{}' is not supported for WordPiece (BertNormalizer is)",
               normalizer.value("type", ""));
    t.clean_text_ = get_or<bool>(normalizer, "clean_text", true);
    t.chinese_chars_ = get_or<bool>(normalizer, "handle_chinese_chars", true);
    t.lowercase_ = get_or<bool>(normalizer, "lowercase", true);
    t.strip_accents_ = get_or<bool>(normalizer, "strip_accents", t.lowercase_);
  } else {
    t.clean_text_ = t.chinese_chars_ = t.strip_accents_ = t.lowercase_ = false;
  }
  const json pre = tj.value("pre_tokenizer", json());
  KILN_CHECK(pre.is_object() && pre.value("type", "") == "BertPreTokenizer",
             "tokenizer.json: pre-tokenizer '{}' is not supported for WordPiece "
             "(BertPreTokenizer is)",
             pre.is_object() ? pre.value("type", "") : std::string("none"));

  for (const json& a : tj.value("added_tokens", json::array())) {
    // Normalized added tokens would be matched after normalization; BERT's are all raw.
    KILN_CHECK(!a.value("normalized", false) || !a.value("special", true),
               "tokenizer.json: normalized special token '{}' is not supported",
               a.value("content", ""));
    t.added_.push_back({a.at("content").get<std::string>(), a.at("id").get<int32_t>()});
  }
  // Longest first: at one position the longest content wins.
  std::stable_sort(t.added_.begin(), t.added_.end(), [](const Added& x, const Added& y) {
    return x.content.size() > y.content.size();
  });

  const json post = tj.value("post_processor", json());
  const std::string post_type = post.is_object() ? post.value("type", "") : "";
  if (post_type == "TemplateProcessing") {
    bool seen_text = false;
    for (const json& item : post.at("single")) {
      if (item.contains("Sequence")) {
        seen_text = true;
        continue;
      }
      const std::string name = item.at("SpecialToken").at("id").get<std::string>();
      for (const json& id : post.at("special_tokens").at(name).at("ids"))
        (seen_text ? t.suffix_ : t.prefix_).push_back(id.get<int32_t>());
    }
  } else if (post_type == "BertProcessing") {
    t.prefix_.push_back(post.at("cls").at(1).get<int32_t>());
    t.suffix_.push_back(post.at("sep").at(1).get<int32_t>());
  } else {
    KILN_CHECK(post_type.empty(), "tokenizer.json: post-processor '{}' is not supported",
               post_type);
  }
  for (int32_t id : t.prefix_)
    KILN_CHECK(id >= 0 && static_cast<size_t>(id) < t.tokens_.size(),
               "tokenizer.json: template token id {} is outside the vocabulary", id);
  for (int32_t id : t.suffix_)
    KILN_CHECK(id >= 0 && static_cast<size_t>(id) < t.tokens_.size(),
               "tokenizer.json: template token id {} is outside the vocabulary", id);
  return t;
}

std::vector<int32_t> BertTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  size_t start = 0;  // the text not yet encoded begins here
  for (size_t i = 0; i < text.size();) {
    const Added* hit = nullptr;
    for (const Added& a : added_) {
      if (!a.content.empty() && text.compare(i, a.content.size(), a.content) == 0) {
        hit = &a;
        break;
      }
    }
    if (hit == nullptr) {
      ++i;
      continue;
    }
    encode_segment(text.substr(start, i - start), out);
    out.push_back(hit->id);
    i += hit->content.size();
    start = i;
  }
  encode_segment(text.substr(start), out);
  return out;
}

std::u32string BertTokenizer::normalize(std::string_view text) const {
  std::u32string s;
  for (char32_t c : decode_utf8(text)) {
    if (clean_text_) {
      if (c == 0 || c == 0xFFFD || is_control(c)) continue;
      if (is_whitespace(c)) c = ' ';
    }
    if (chinese_chars_ && is_cjk_ideograph(c)) {
      s.push_back(' ');
      s.push_back(c);
      s.push_back(' ');
    } else {
      s.push_back(c);
    }
  }
  if (strip_accents_) {
    const bool ascii = std::all_of(s.begin(), s.end(), [](char32_t c) { return c < 0x80; });
    if (!ascii) {
      UErrorCode status = U_ZERO_ERROR;
      const icu::Normalizer2* nfd = icu::Normalizer2::getNFDInstance(status);
      KILN_CHECK(U_SUCCESS(status), "ICU has no NFD normalizer: {}", u_errorName(status));
      const std::string utf8 = encode_utf8(s);
      const icu::UnicodeString decomposed =
          nfd->normalize(icu::UnicodeString::fromUTF8(icu::StringPiece(utf8)), status);
      KILN_CHECK(U_SUCCESS(status), "NFD normalization failed: {}", u_errorName(status));
      s.clear();
      for (int32_t i = 0; i < decomposed.length();) {
        const UChar32 c = decomposed.char32At(i);
        i += U16_LENGTH(c);
        if (u_charType(c) != U_NON_SPACING_MARK) s.push_back(static_cast<char32_t>(c));
      }
    }
  }
  if (lowercase_) {
    std::u32string lower;
    lower.reserve(s.size());
    for (char32_t c : s) append_lowercase(c, lower);
    s = std::move(lower);
  }
  return s;
}

void BertTokenizer::encode_segment(std::string_view text, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  const std::u32string s = normalize(text);
  std::u32string word;
  auto flush = [&] {
    if (!word.empty()) encode_word(word, out);
    word.clear();
  };
  for (char32_t c : s) {
    if (is_whitespace(c)) {
      flush();
    } else if (is_punctuation(c)) {
      flush();
      word.push_back(c);
      flush();
    } else {
      word.push_back(c);
    }
  }
  flush();
}

void BertTokenizer::encode_word(const std::u32string& word, std::vector<int32_t>& out) const {
  if (word.size() > max_word_chars_) {
    out.push_back(unk_id_);
    return;
  }
  const size_t first = out.size();
  std::string piece;
  for (size_t start = 0; start < word.size();) {
    int32_t found = -1;
    size_t end = word.size();
    for (; end > start; --end) {
      piece = start > 0 ? continuation_ : std::string();
      for (size_t k = start; k < end; ++k) append_utf8(word[k], piece);
      auto it = ids_.find(piece);
      if (it != ids_.end()) {
        found = it->second;
        break;
      }
    }
    if (found < 0) {  // no piece covers this part: the whole word is unknown
      out.resize(first);
      out.push_back(unk_id_);
      return;
    }
    out.push_back(found);
    start = end;
  }
}

std::string BertTokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  std::string out;
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= tokens_.size()) continue;
    const bool added =
        std::any_of(added_.begin(), added_.end(), [id](const Added& a) { return a.id == id; });
    if (skip_special && added) continue;
    const std::string& piece = tokens_[static_cast<size_t>(id)];
    if (!added && piece.starts_with(continuation_)) {
      out.append(piece, continuation_.size());
    } else {
      if (!out.empty()) out.push_back(' ');
      out.append(piece);
    }
  }
  return out;
}

std::vector<int32_t> BertTokenizer::add_specials(std::vector<int32_t> ids,
                                                 size_t max_tokens) const {
  const size_t specials = special_count();
  if (max_tokens > 0)
    ids.resize(std::min(ids.size(), max_tokens > specials ? max_tokens - specials : size_t{0}));
  std::vector<int32_t> out;
  out.reserve(ids.size() + specials);
  out.insert(out.end(), prefix_.begin(), prefix_.end());
  out.insert(out.end(), ids.begin(), ids.end());
  out.insert(out.end(), suffix_.begin(), suffix_.end());
  return out;
}

}  // namespace kiln::model
