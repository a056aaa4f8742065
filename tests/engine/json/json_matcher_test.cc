// JsonMatcher against nlohmann::json (the project's JSON library) as the oracle of validity:
// a hand-written corpus of valid and invalid texts, then thousands of random documents and
// random mutations of them. With the any-value schema the matcher must accept exactly the
// texts nlohmann accepts (minus whitespace around the top-level value, which the matcher
// refuses by design), and every prefix of a valid text.
#include "kiln/engine/json/json_matcher.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace kiln::engine {
namespace {

using nlohmann::json;

// Whether the matcher accepts the whole text as a complete value.
bool matches(const std::shared_ptr<const JsonSchema>& schema, const std::string& text) {
  JsonMatcher m(schema);
  return m.feed(text) && m.complete();
}

// How many leading bytes the matcher accepts.
size_t accepted_prefix(const std::shared_ptr<const JsonSchema>& schema, const std::string& text) {
  JsonMatchState s = json_start(*schema);
  for (size_t i = 0; i < text.size(); ++i) {
    if (!json_feed(*schema, s, static_cast<uint8_t>(text[i]))) return i;
  }
  return text.size();
}

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Every run of whitespace outside strings has a shape the matcher allows (json_matcher.h): one
// space or tab, or a line break ("\n", "\r\n") and at most 4 blanks per object or array open.
bool serializer_whitespace(const std::string& text) {
  size_t open = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    if (in_string) {
      in_string = escaped || c != '"';
      escaped = !escaped && c == '\\';
      ++i;
      continue;
    }
    if (!is_ws(c)) {
      if (c == '"') in_string = true;
      if (c == '[' || c == '{') ++open;
      if ((c == ']' || c == '}') && open > 0) --open;
      ++i;
      continue;
    }
    size_t j = i;
    if (text[j] == '\r') ++j;
    const bool line = j < text.size() && text[j] == '\n';
    if (text[i] == '\r' && !line) return false;
    if (line) ++j;
    size_t blanks = 0;
    while (j < text.size() && (text[j] == ' ' || text[j] == '\t')) ++j, ++blanks;
    if (j < text.size() && is_ws(text[j])) return false;  // a break after blanks, a second one
    if (blanks > (line ? 4 * std::max<size_t>(open, 1) : 1)) return false;
    i = j;
  }
  return true;
}

// The oracle: nlohmann parses it, without whitespace around the top-level value, and its
// whitespace has the shapes serializers write (serializer_whitespace). nullopt
// when nlohmann cannot tell: a number too large for a double (1e999) makes it stop with
// out_of_range (error 406) before it has read the rest of the text.
std::optional<bool> oracle(const std::string& text) {
  if (text.empty() || is_ws(text.front()) || is_ws(text.back())) return false;
  if (!serializer_whitespace(text)) return false;
  try {
    const json parsed = json::parse(text);
    (void)parsed;
    return true;
  } catch (const json::out_of_range&) {
    return std::nullopt;
  } catch (const json::parse_error&) {
    return false;
  }
}

const std::vector<std::string> kValid = {"{}",
                                         "[]",
                                         "0",
                                         "-0",
                                         "1",
                                         "-12",
                                         "3.25",
                                         "1e5",
                                         "1E+5",
                                         "2.5e-3",
                                         "-0.0e0",
                                         "true",
                                         "false",
                                         "null",
                                         "\"\"",
                                         "\"a\"",
                                         R"("\"\\\/\b\f\n\r\t")",
                                         R"("\u0041\u00e9\uD83D\uDE00")",
                                         "\"caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80\"",
                                         R"({"a":1})",
                                         R"({ "a" : [ 1 , 2 ] })",
                                         "{\n  \"k\": {\"n\": null},\n  \"t\": [true, false]\n}",
                                         R"([[[]],[{}],""])",
                                         R"({"a":{"b":{"c":[1,{"d":"e"}]}}})",
                                         R"({"":0,"":1})",
                                         "[1,2.5,-3e2,\"x\"]",
                                         "\"\x7F\""};

const std::vector<std::string> kInvalid = {
    "",
    "{",
    "[",
    "{]",
    "[}",
    "{,}",
    "[,]",
    "[1,]",
    "{\"a\":1,}",
    "{\"a\"}",
    "{\"a\" 1}",
    "{a:1}",
    "01",
    "-",
    "1.",
    ".5",
    "1e",
    "1e+",
    "+1",
    "--1",
    "0x10",
    "tru",
    "truee",
    "nul",
    "True",
    "'a'",
    "\"abc",
    "\"\\x\"",
    "\"\\u12\"",
    "\"\\u12G4\"",
    "\"a\nb\"",
    "\"\t\"",
    R"("\uDC00")",        // a lone low surrogate
    R"("\uD800")",        // a high surrogate with nothing after it
    R"("\uD800\u0041")",  // a high surrogate followed by a non-surrogate
    "\"\xC3\"",
    "\"\xC0\x80\"",  // truncated and overlong UTF-8
    "\"\xE0\x80\x80\"",
    "\"\xED\xA0\x80\"",
    "\"\xF4\x90\x80\x80\"",
    "\"\xFF\"",
    "\"\x80\"",
    "[1 2]",
    "{\"a\":1 \"b\":2}",
    "{} {}",
    "[] ",
    " []",
    "1 ",
    "\"a\"\"b\""};

TEST(JsonMatcher, HandWrittenCorpusAgreesWithNlohmann) {
  const auto any = JsonSchema::any();
  for (const auto& t : kValid) {
    ASSERT_EQ(oracle(t), true) << "corpus error: " << t;
    EXPECT_TRUE(matches(any, t)) << t;
    // Every prefix is accepted (and only the whole text is complete, numbers aside).
    EXPECT_EQ(accepted_prefix(any, t), t.size()) << t;
  }
  for (const auto& t : kInvalid) {
    ASSERT_EQ(oracle(t), false) << "corpus error: " << t;
    EXPECT_FALSE(matches(any, t)) << t;
  }
  // Grammatically valid, beyond a double's range (nlohmann refuses to store it, Python reads
  // inf): the grammar allows it.
  EXPECT_TRUE(matches(any, "[1e999,-1E+999]"));
}

// Random JSON values with deep nesting, escapes and non-ASCII text.
json random_value(std::mt19937_64& rng, int depth) {
  const int kind = static_cast<int>(rng() % (depth > 3 ? 5 : 7));
  switch (kind) {
    case 0:
      return nullptr;
    case 1:
      return rng() % 2 == 0;
    case 2:
      return static_cast<int64_t>(rng() % 2000) - 1000;
    case 3:
      return std::ldexp(static_cast<double>(rng() % 100000) - 50000, -static_cast<int>(rng() % 40));
    case 4: {
      static const std::vector<std::string> parts = {
          "a",    "Z",  " ",    "\"",       "\\",           "/",
          "\n",   "\t", "\x01", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80",
          "\x7F", "key"};
      std::string s;
      const int n = static_cast<int>(rng() % 6);
      for (int i = 0; i < n; ++i) s += parts[rng() % parts.size()];
      return s;
    }
    case 5: {
      json a = json::array();
      const int n = static_cast<int>(rng() % 4);
      for (int i = 0; i < n; ++i) a.push_back(random_value(rng, depth + 1));
      return a;
    }
    default: {
      json o = json::object();
      const int n = static_cast<int>(rng() % 4);
      for (int i = 0; i < n; ++i) o[random_value(rng, 4).dump()] = random_value(rng, depth + 1);
      return o;
    }
  }
}

// Texts of random values: compact, indented (nlohmann's pretty printer) and with \u escapes
// (ensure_ascii: surrogate pairs for emoji).
std::vector<std::string> random_documents(int n) {
  std::mt19937_64 rng(42);
  std::vector<std::string> docs;
  for (int i = 0; i < n; ++i) {
    const json v = random_value(rng, 0);
    docs.push_back(v.dump());
    docs.push_back(v.dump(1, '\t'));
    docs.push_back(v.dump(-1, ' ', /*ensure_ascii=*/true));
  }
  return docs;
}

TEST(JsonMatcher, RandomDocumentsAndEveryPrefixAreAccepted) {
  const auto any = JsonSchema::any();
  for (const auto& t : random_documents(2000)) {
    ASSERT_EQ(oracle(t), true) << t;
    EXPECT_EQ(accepted_prefix(any, t), t.size()) << t;
    EXPECT_TRUE(matches(any, t)) << t;
  }
}

TEST(JsonMatcher, RandomMutationsAgreeWithNlohmann) {
  const auto any = JsonSchema::any();
  std::mt19937_64 rng(7);
  // Bytes that matter to the grammar, plus UTF-8 lead and continuation bytes.
  const std::string alphabet = "{}[]\",:\\/ \t\n0123456789-+.eEtrufalsn\"uDdCcAa\x01\x7F";
  const std::string high = "\x80\xA0\xBF\xC0\xC3\xE0\xED\xF0\xF4\xF5\xFF";
  int agree_valid = 0, agree_invalid = 0;
  for (const auto& doc : random_documents(1500)) {
    for (int k = 0; k < 4; ++k) {
      std::string t = doc;
      const int edits = 1 + static_cast<int>(rng() % 3);
      for (int e = 0; e < edits && !t.empty(); ++e) {
        const size_t at = rng() % t.size();
        const char c =
            rng() % 5 == 0 ? high[rng() % high.size()] : alphabet[rng() % alphabet.size()];
        switch (rng() % 4) {
          case 0:
            t.erase(at, 1);
            break;
          case 1:
            t.insert(at, 1, c);
            break;
          case 2:
            t[at] = c;
            break;
          default:
            t.resize(at);  // truncation
        }
      }
      const std::optional<bool> verdict = oracle(t);
      if (!verdict) continue;
      const bool expected = *verdict;
      ASSERT_EQ(matches(any, t), expected) << (expected ? "valid" : "invalid") << ": " << t;
      (expected ? agree_valid : agree_invalid)++;
    }
  }
  // The mutations must exercise both sides.
  EXPECT_GT(agree_valid, 500);
  EXPECT_GT(agree_invalid, 2000);
}

bool same_state(const JsonMatchState& a, const JsonMatchState& b) {
  if (a.ws_run != b.ws_run || a.stack.size() != b.stack.size()) return false;
  for (size_t i = 0; i < a.stack.size(); ++i) {
    const JsonFrame &x = a.stack[i], &y = b.stack[i];
    if (x.kind != y.kind || x.phase != y.phase || x.aux != y.aux || x.flags != y.flags ||
        x.node != y.node || x.pos != y.pos || x.used != y.used)
      return false;
  }
  return true;
}

// The vocabulary walk's shortcut: a byte said to keep the state must be accepted and change
// nothing. Checked for every byte at every prefix of random documents, and of strings under a
// pattern whose automaton loops on most characters.
int check_kept_bytes(const std::shared_ptr<const JsonSchema>& schema,
                     const std::vector<std::string>& documents) {
  int kept = 0;
  for (const auto& t : documents) {
    JsonMatchState s = json_start(*schema);
    for (size_t i = 0; i <= t.size(); ++i) {
      for (int b = 0; b < 256; ++b) {
        if (!json_byte_keeps_state(*schema, s, static_cast<uint8_t>(b))) continue;
        ++kept;
        JsonMatchState copy = s;
        EXPECT_TRUE(json_feed(*schema, copy, static_cast<uint8_t>(b)))
            << t.substr(0, i) << " + " << b;
        EXPECT_TRUE(same_state(copy, s)) << t.substr(0, i) << " + " << b;
      }
      if (i < t.size()) {
        EXPECT_TRUE(json_feed(*schema, s, static_cast<uint8_t>(t[i]))) << t.substr(0, i + 1);
      }
    }
  }
  return kept;
}

TEST(JsonMatcher, BytesThatKeepTheStateReallyDo) {
  EXPECT_GT(check_kept_bytes(JsonSchema::any(), random_documents(200)), 1000);
  const auto patterned = JsonSchema::compile(json::parse(R"({"type": "array", "items":
      {"type": "string", "pattern": "^[^<>]*(<b>)?x{0,2}$"}})"));
  EXPECT_GT(check_kept_bytes(patterned, {R"(["ab<b>x", "", "<b>xx", "a\"\\b"])"}), 500);
}

TEST(JsonMatcher, WhitespaceRunsHaveTheShapesSerializersWrite) {
  const auto any = JsonSchema::any();
  // Compact, Python's default separators, indents of 2 and 4 and tabs, CRLF line breaks.
  for (const json& v : {json::parse(R"({"a": [1, {"b": [true, null]}], "c": "x y"})"),
                        json::parse(R"([[[[[["deep"]]]]]])")}) {
    for (const std::string& text : {v.dump(), v.dump(2), v.dump(4), v.dump(1, '\t')}) {
      EXPECT_TRUE(matches(any, text)) << text;
    }
  }
  EXPECT_TRUE(matches(any, "{\"a\": 1, \"b\": [1, 2]}"));
  EXPECT_TRUE(matches(any, "[\r\n    1,\r\n    2\r\n]"));
  // Not a serializer's: two spaces, blank lines, spaces before a break, a lone \r, an indent
  // deeper than 4 per level open.
  for (const std::string text :
       {"[1,  2]", "[\n\n1]", "[ \n1]", "[\r1]", "[1,\n         2]", "{\"a\":\t\t1}"}) {
    EXPECT_FALSE(matches(any, text)) << text;
  }
  EXPECT_TRUE(matches(any, "[1,\n    2]"));
  // Spaces inside strings are content, not counted.
  EXPECT_TRUE(matches(any, "\"" + std::string(100, ' ') + "\""));
}

TEST(JsonMatcher, NestingIsBounded) {
  const auto any = JsonSchema::any();
  const auto nested = [](size_t n) { return std::string(n, '[') + std::string(n, ']'); };
  EXPECT_TRUE(matches(any, nested(kMaxJsonDepth)));
  EXPECT_FALSE(matches(any, nested(kMaxJsonDepth + 1)));
}

TEST(JsonMatcher, CompleteOnlyAtTheEndOfTheValue) {
  const auto any = JsonSchema::any();
  JsonMatcher m(any);
  EXPECT_FALSE(m.complete());
  ASSERT_TRUE(m.feed("{\"a\":[1"));
  EXPECT_FALSE(m.complete());
  ASSERT_TRUE(m.feed("]}"));
  EXPECT_TRUE(m.complete());
  EXPECT_FALSE(JsonMatcher(m).feed(" "));  // nothing after a complete value
  JsonMatcher n(any);
  ASSERT_TRUE(n.feed("12"));
  EXPECT_TRUE(n.complete());  // a top-level number may end here...
  EXPECT_TRUE(n.feed("3"));   // ...or go on
  ASSERT_TRUE(n.feed("."));
  EXPECT_FALSE(n.complete());
}

TEST(JsonMatcher, ObjectOnlyRootForJsonObjectMode) {
  const auto obj = JsonSchema::any(json_type::kObject);
  EXPECT_TRUE(matches(obj, R"({"a":[1,"x"]})"));
  EXPECT_FALSE(matches(obj, "[1]"));
  EXPECT_FALSE(matches(obj, "\"x\""));
  EXPECT_FALSE(matches(obj, "1"));
}

}  // namespace
}  // namespace kiln::engine
