// The per-step token mask on a tiny vocabulary: the trie walk must allow exactly the tokens a
// token-by-token check allows (every byte accepted from the current state), at every point of
// several documents; end-of-sequence only when the value is complete. The vocabulary has
// multi-byte tokens that cross structural boundaries ("\":", "},{"), byte tokens that split a
// UTF-8 character, duplicates, and tokens sharing prefixes.
#include "kiln/engine/json/json_token_mask.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kiln::engine {
namespace {

const std::vector<std::string> kPieces = {
    "{",   "}",     "[",    "]",    ",",        ":",        "\"",   "\":",  "\":\"", "\",\"",
    "},{", " ",     "\n",   "  ",   "a",        "ab",       "abc",  "name", "nam",   "\"name",
    "age", "1",     "12",   "0",    "-",        ".",        "e",    "5",    "true",  "tr",
    "ue",  "false", "null", "nu",   "\\",       "\\n",      "u",    "D",    "8",     "3",
    "C",   "E",     "\xC3", "\xA9", "\xC3\xA9", "\xE2\x82", "\xAC", "{\"",  "\"}",   "1}",
    "a\"", "\"a\"", "[1",   ",\"",  "\t",       "\x01",     "ab"};  // "ab" twice
constexpr int32_t kEos = 1000;

TokenTrie make_trie() {
  std::vector<std::string> pieces = kPieces;
  pieces.emplace_back();  // no bytes: never allowed
  return TokenTrie::from_pieces(pieces);
}

// The oracle: each token's bytes fed one at a time to a copy of the matcher.
std::vector<uint8_t> brute_force(const JsonMatcher& m, size_t vocab) {
  std::vector<uint8_t> allowed(vocab, 0);
  for (size_t i = 0; i < kPieces.size(); ++i) {
    JsonMatcher copy = m;
    allowed[i] = copy.feed(kPieces[i]) ? 1 : 0;
  }
  if (m.complete()) allowed[kEos] = 1;
  return allowed;
}

void check_document(const std::shared_ptr<const JsonSchema>& schema, const std::string& doc) {
  const TokenTrie trie = make_trie();
  const size_t vocab = kEos + 1;
  const int32_t end_ids[] = {kEos};
  JsonMatcher m(schema);
  std::vector<uint8_t> allowed(vocab);
  for (size_t i = 0; i <= doc.size(); ++i) {
    const int64_t n = json_allowed_tokens(trie, m, end_ids, allowed);
    const std::vector<uint8_t> expected = brute_force(m, vocab);
    ASSERT_EQ(allowed, expected) << "after '" << doc.substr(0, i) << "'";
    int64_t count = 0;
    for (uint8_t a : expected) count += a;
    EXPECT_EQ(n, count);
    EXPECT_EQ(allowed[kEos] != 0, i == doc.size()) << doc.substr(0, i);
    if (i < doc.size()) {
      ASSERT_TRUE(m.feed(doc.substr(i, 1))) << doc.substr(0, i + 1);
    }
  }
  // Once complete, end of sequence is the only choice (no trailing whitespace).
  EXPECT_EQ(allowed[kEos], 1);
  int64_t others = 0;
  for (size_t i = 0; i < kPieces.size(); ++i) others += allowed[i];
  EXPECT_EQ(others, 0);
}

TEST(JsonTokenMask, TrieWalkMatchesTokenByTokenCheck) {
  check_document(JsonSchema::any(),
                 "{\"name\":\"ab\\n\xC3\xA9\xE2\x82\xAC\\uD83D\\uDE00\",\"x\": [1, -0.5e12, true,"
                 " null, {}], \"y\":\n{\"z\":false}}");
  check_document(JsonSchema::any(json_type::kObject), "{\"a\":[[], \"\"]}");
  check_document(JsonSchema::compile(nlohmann::json::parse(
                     R"({"type": "object", "properties": {"name": {"type": "string"},
                         "age": {"enum": [1, 12, 125]}}, "required": ["name", "age"]})")),
                 "{\"age\":12,\"name\":\"abc\"}");
  // A length-limited string walks the whole trie (plain content changes the count), so the
  // multi-character tokens must be cut off exactly at maxLength and the quote before minLength.
  check_document(JsonSchema::compile(nlohmann::json::parse(
                     R"({"type": "object", "properties": {"name": {"type": "string",
                         "minLength": 2, "maxLength": 4}}, "required": ["name"]})")),
                 "{\"name\":\"ab\xC3\xA9\"}");
  // A patterned string walks the whole trie too (each character moves its automaton), with
  // multi-byte characters split across byte tokens and an escape.
  check_document(JsonSchema::compile(nlohmann::json::parse(
                     R"({"type": "object", "properties": {"name": {"type": "string",
                         "pattern": "^(ab|\u00e9|\u20ac)+\\n?[0-9]*$"}}, "required": ["name"]})")),
                 "{\"name\":\"ab\xC3\xA9\xE2\x82\xAC\\n12\"}");
  // Unanchored: once "ab" is written the automaton loops on everything and the walk takes
  // plain content from the precomputed mask again.
  check_document(JsonSchema::compile(nlohmann::json::parse(
                     R"({"type": "array", "items": {"type": "string", "pattern": "ab"}})")),
                 "[\"xab\xC3\xA9\\\"\",\"ab\"]");
}

TEST(JsonTokenMask, ByteTokensCompleteACharacterOnlyInsideStrings) {
  const TokenTrie trie = make_trie();
  std::vector<uint8_t> allowed(kEos + 1);
  JsonMatcher m(JsonSchema::any());
  ASSERT_TRUE(m.feed("[\""));
  json_allowed_tokens(trie, m, {}, allowed);
  const auto id = [](const std::string& p) {
    return static_cast<size_t>(std::find(kPieces.begin(), kPieces.end(), p) - kPieces.begin());
  };
  EXPECT_TRUE(allowed[id("\xC3")]);
  EXPECT_FALSE(allowed[id("\xA9")]);  // a continuation byte cannot start a character
  EXPECT_FALSE(allowed[id("\x01")]);  // raw control characters must be escaped
  EXPECT_FALSE(allowed[id("\t")]);
  ASSERT_TRUE(m.feed("\xC3"));
  json_allowed_tokens(trie, m, {}, allowed);
  EXPECT_TRUE(allowed[id("\xA9")]);
  EXPECT_FALSE(allowed[id("\xC3")]);
  EXPECT_FALSE(allowed[id("\"")]);        // the character must be finished first
  EXPECT_FALSE(allowed[kPieces.size()]);  // the empty token, never
}

TEST(JsonTokenMask, DuplicatesAndSharedPrefixesAllGetTheirIds) {
  const TokenTrie trie = make_trie();
  EXPECT_EQ(trie.token_count(), kPieces.size());  // the empty token is left out
  std::vector<uint8_t> allowed(kEos + 1);
  JsonMatcher m(JsonSchema::any());
  ASSERT_TRUE(m.feed("\""));
  json_allowed_tokens(trie, m, {}, allowed);
  EXPECT_TRUE(allowed[15]);                  // "ab"
  EXPECT_TRUE(allowed[kPieces.size() - 1]);  // "ab" again
  EXPECT_TRUE(allowed[16]);                  // "abc"
}

}  // namespace
}  // namespace kiln::engine
