// The pre-tokenizer table and the splitting rules it relies on (a sequence of regexes, each
// splitting the previous one's pieces; empty matches as cuts; $ at the end of a piece only),
// and WordPiece on a hand-made vocab. The whole table is checked on llama.cpp's own test set by
// tests/model/test_llama_vocab.py.
#include "kiln/model/tokenizer_pretypes.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "kiln/base/error.h"
#include "kiln/model/tokenizer.h"
#include "kiln/model/tokenizer_pretokenizer.h"

namespace kiln::model {
namespace {

using Words = std::vector<std::string>;

Words split(const std::vector<std::string>& regexes, std::string_view text) {
  PreTokenizer pre(regexes);
  Words out;
  for (std::string_view w : pre.split(text)) out.emplace_back(w);
  return out;
}

Words split_as(std::string_view pre, std::string_view text) {
  const PreTokenizerType* row = find_pretokenizer_type(pre);
  EXPECT_NE(row, nullptr) << pre;
  if (row == nullptr) return {};
  return split({row->regexes.begin(), row->regexes.end()}, text);
}

TEST(PreTokenizerTable, EveryRowCompilesAndEveryNameIsUnique) {
  std::set<std::string_view> names;
  for (const PreTokenizerType& row : pretokenizer_types()) {
    for (std::string_view name : row.names) EXPECT_TRUE(names.insert(name).second) << name;
    if (!row.refusal.empty()) continue;
    ASSERT_FALSE(row.regexes.empty()) << row.type;
    EXPECT_NO_THROW(PreTokenizer({row.regexes.begin(), row.regexes.end()})) << row.type;
  }
  // The ones real files name most, and the SmolLM2 file the docs use.
  for (const char* name : {"llama-bpe", "qwen2", "qwen35", "gpt-2", "smollm", "deepseek-v3",
                           "gpt-4o", "tekken", "olmo", "dbrx", "jais", "chatglm-bpe", "default"}) {
    const PreTokenizerType* row = find_pretokenizer_type(name);
    ASSERT_NE(row, nullptr) << name;
    EXPECT_TRUE(row->refusal.empty()) << name;
  }
}

TEST(PreTokenizer, EachRegexSplitsThePiecesOfThePreviousOne) {
  // First the digits are cut out one by one, then GPT-2's regex splits what is left: " 42"
  // does not become one word as GPT-2 alone would make it.
  EXPECT_EQ(split_as("smollm", "ab 42x"), (Words{"ab", " ", "4", "2", "x"}));
  EXPECT_EQ(split_as("gpt-2", "ab 42x"), (Words{"ab", " 42", "x"}));
  // Text no regex matches stays, as its own word.
  EXPECT_EQ(split({"[0-9]+"}, "a12b"), (Words{"a", "12", "b"}));
}

TEST(PreTokenizer, EmptyMatchesOnlyCut) {
  // superbpe: digit runs in groups of three from the right.
  EXPECT_EQ(split_as("superbpe", "x1234567"), (Words{"x", "1", "234", "567"}));
  EXPECT_EQ(split_as("superbpe", "123456"), (Words{"123", "456"}));
}

TEST(PreTokenizer, DollarIsTheEndOfThePieceOnly) {
  // deepseek-llm's "\s+$": trailing spaces, not spaces before a final newline.
  EXPECT_EQ(split({R"(\s+$)"}, "a  "), (Words{"a", "  "}));
  EXPECT_EQ(split({"[ ]+$"}, "a  \n"), (Words{"a  \n"}));  // not before a final newline
  // Each piece has its own end: the spaces before the newline end the piece "a  ".
  EXPECT_EQ(split({"[\r\n]", R"(\s+$)"}, "a  \nb"), (Words{"a", "  ", "\n", "b"}));
}

TEST(PreTokenizer, ContractionsAreCaseSensitivePairsAsInLlamaCpp) {
  EXPECT_EQ(split_as("llama-bpe", "IT'S it's"), (Words{"IT", "'S", " it", "'s"}));
  // U+017F (long s) is no 's' for llama.cpp (PCRE2's caseless matching would take it).
  EXPECT_EQ(split_as("llama-bpe", "it'\xC5\xBF"), (Words{"it", "'\xC5\xBF"}));
}

TEST(PreTokenizer, RefusedRowsSayWhy) {
  for (const char* name : {"kimi-k2", "afmoe", "tiny_aya", "whitespace", "mmbert"}) {
    const PreTokenizerType* row = find_pretokenizer_type(name);
    ASSERT_NE(row, nullptr) << name;
    EXPECT_FALSE(row->refusal.empty()) << name;
  }
}

// A WordPiece vocab as llama.cpp's converter stores it: word-initial pieces with U+2581.
TokenizerVocab wpm_vocab() {
  TokenizerVocab v;
  v.model = "bert";
  v.tokens = {"[PAD]",
              "[UNK]",
              "[CLS]",
              "[SEP]",
              "\xE2\x96\x81hello",
              "\xE2\x96\x81un",
              "believ",
              "able",
              "\xE2\x96\x81,",
              "\xE2\x96\x81"
              "apfel",
              "\xE2\x96\x81\xE4\xB8\xAD",
              "\xE2\x96\x81"
              "a",
              "a"};
  v.token_types = {3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1};
  v.unk_id = 1;
  v.bos_id = 2;
  v.eos_id = 3;
  v.add_bos = true;
  v.add_eos = true;
  return v;
}

TEST(WordPiece, LongestPiecesLowercasedAccentsStrippedPunctuationApart) {
  auto tok = Tokenizer::create(wpm_vocab());
  // "Äpfel" -> "apfel" (lowercase, accents stripped); "," a word of its own; the CJK ideograph
  // too; "unbelievable" from the longest pieces, left to right.
  EXPECT_EQ(tok->encode("Hello, \xC3\x84pfel unbelievable\xE4\xB8\xAD", false, false),
            (std::vector<int32_t>{4, 8, 9, 5, 6, 7, 10}));
  // A word some part of which is no piece is [UNK] whole; [CLS]/[SEP] frame the text.
  EXPECT_EQ(tok->encode("hello unbelievz", true, false), (std::vector<int32_t>{2, 4, 1, 3}));
  // Over 100 characters: [UNK] whatever its pieces (BERT's max_input_chars_per_word).
  std::string long_word;
  for (int i = 0; i < 50; ++i) long_word += "a";
  std::vector<int32_t> a50(50, 12);  // "▁a" then 49 continuation "a"
  a50[0] = 11;
  EXPECT_EQ(tok->encode(long_word + long_word, false, false), [&] {
    std::vector<int32_t> a100 = a50;
    a100.insert(a100.end(), 50, 12);
    return a100;
  }());
  EXPECT_EQ(tok->encode(long_word + long_word + "a", false, false), (std::vector<int32_t>{1}));
  // Decoding puts the word-initial pieces' spaces back.
  EXPECT_EQ(tok->decode({4, 8, 5, 6, 7}, true), " hello , unbelievable");
}

TEST(WordPiece, WithoutLowercasingCaseMatters) {
  TokenizerVocab v = wpm_vocab();
  v.lowercase = false;
  v.strip_accents = false;
  auto tok = Tokenizer::create(std::move(v));
  EXPECT_EQ(tok->encode("Hello hello", false, false), (std::vector<int32_t>{1, 4}));
}

}  // namespace
}  // namespace kiln::model
