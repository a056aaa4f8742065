// `pattern` and `format` automata (regex_subset.h, string_formats.h): every ASCII string up to
// a length over a small alphabet is matched exactly when std::regex (ECMAScript grammar, an
// implementation kiln did not write) finds the pattern in it; the refused constructs are
// refused with their reason; formats accept and refuse known strings; intersection and length
// limits compose; no state is a dead end.
#include "kiln/engine/json/regex_subset.h"

#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "kiln/engine/json/string_formats.h"

namespace kiln::engine {
namespace {

// Walks `text` (UTF-8) through the automaton; true when it ends in an accepting state.
bool accepts(const StringAutomaton& a, const std::string& text) {
  uint32_t state = StringAutomaton::start();
  for (size_t i = 0; i < text.size();) {
    const auto b = static_cast<uint8_t>(text[i]);
    const int extra = b < 0x80 ? 0 : b >= 0xF0 ? 3 : b >= 0xE0 ? 2 : 1;
    uint32_t cp = extra == 0 ? b : b & (0x3F >> extra);
    for (int k = 1; k <= extra; ++k) cp = (cp << 6) | (static_cast<uint8_t>(text[i + k]) & 0x3F);
    i += static_cast<size_t>(extra) + 1;
    const int64_t next = a.next(state, cp);
    if (next < 0) return false;
    state = static_cast<uint32_t>(next);
  }
  return a.accepting(state);
}

std::vector<std::string> all_strings(const std::string& alphabet, size_t max_len) {
  std::vector<std::string> out = {""};
  for (size_t i = 0; out[i].size() < max_len; ++i) {
    for (char c : alphabet) out.push_back(out[i] + c);
    if (i + 1 >= out.size()) break;
  }
  return out;
}

TEST(RegexSubset, AgreesWithStdRegexSearchOnEveryShortString) {
  struct Case {
    const char* pattern;
    const char* alphabet;
    size_t max_len;
  };
  const Case cases[] = {
      {"^abc$", "abc", 4},
      {"abc", "abc", 5},  // unanchored: anywhere in the string
      {"^a", "ab", 4},
      {"b$", "ab", 4},
      {"^(a|bc)*$", "abc", 5},
      {"^a+b?c{2}$", "abc", 5},
      {"^[a-c]{2,3}$", "abcd", 4},
      {"^[^a]*$", "ab\n", 4},
      {"^.$", "a\n\r-", 2},
      {"^\\d+(\\.\\d{1,2})?$", "12.a", 5},
      {"^\\w\\W\\s\\S$", "a_ -.\t", 4},
      {"^(?:ab|a)(?:b|)$", "ab", 4},
      {"^x{0,2}y{1,}$", "xy", 5},
      {"^[\\-a]+$", "a-b", 4},
      {"^[a\\]]+$", "a]b", 4},
      {"^a|b$", "ab", 3},
      {"^(a|b)*?c+?$", "abc", 4},
      {"^\\x41\\u0042[\\t ]$", "AB \tC", 4},
      {"^a{2}$|^b{3}$", "ab", 4},
      {"^[0-9a-fA-F]{2}$", "0aF-g", 3},
      {"^ab*(c|d)?$", "abcd", 5},
      {"^[.]\\.+$", ".a", 4},
      {"^[\\d\\s]+$", "1 a", 4},
      {"^[^\\d]$", "1a ", 2},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.pattern);
    const StringAutomaton a = compile_pattern(c.pattern);
    const std::regex oracle(c.pattern, std::regex::ECMAScript);
    int matched = 0;
    for (const std::string& s : all_strings(c.alphabet, c.max_len)) {
      const bool expected = std::regex_search(s, oracle);
      EXPECT_EQ(accepts(a, s), expected) << "'" << s << "'";
      matched += expected;
    }
    EXPECT_GT(matched, 0);
  }
}

TEST(RegexSubset, NonAsciiCharactersAndDot) {
  const StringAutomaton a = compile_pattern("^é.[α-ω]$");
  EXPECT_TRUE(accepts(a, "éxβ"));
  EXPECT_TRUE(accepts(a, "é€ω"));
  EXPECT_FALSE(accepts(a, "éxA"));
  EXPECT_FALSE(accepts(a, "e xβ"));
  // `.` and negated classes stop at the BMP (ECMA-262 without u counts UTF-16 units).
  EXPECT_FALSE(accepts(compile_pattern("^.$"), "\xF0\x9F\x98\x80"));
  EXPECT_FALSE(accepts(compile_pattern("^[^a]$"), "\xF0\x9F\x98\x80"));
  // Negated shorthands are ASCII complements.
  EXPECT_TRUE(accepts(compile_pattern("^\\D$"), "x"));
  EXPECT_FALSE(accepts(compile_pattern("^\\D$"), "é"));
  EXPECT_TRUE(accepts(compile_pattern("^[^\\d]$"), "x"));
  EXPECT_FALSE(accepts(compile_pattern("^[^\\d]$"), "é"));
}

TEST(RegexSubset, BraceThatIsNoQuantifierIsText) {
  // As ECMA-262 (Annex B) and Python read it.
  EXPECT_TRUE(accepts(compile_pattern("^a{2$"), "a{2"));
  EXPECT_TRUE(accepts(compile_pattern("^a{x}$"), "a{x}"));
  EXPECT_FALSE(accepts(compile_pattern("^a{2}$"), "a{2}"));
}

TEST(RegexSubset, ControlCharactersAJsonStringCannotCarryRawAreLeftOut) {
  // \v (U+000B) needs a \u escape in JSON: the only string is unreachable, so nothing matches.
  EXPECT_THROW(compile_pattern("^\\v$"), RegexError);
  EXPECT_TRUE(accepts(compile_pattern("^\\s$"), "\n"));
  EXPECT_FALSE(accepts(compile_pattern("^\\s$"), "\v"));
}

std::string error_of(const char* pattern) {
  try {
    compile_pattern(pattern);
  } catch (const RegexError& e) {
    return e.what();
  }
  return "(compiled)";
}

TEST(RegexSubset, RefusesWhatItDoesNotSupportAndSaysWhy) {
  EXPECT_NE(error_of("(a)\\1").find("backreference"), std::string::npos);
  EXPECT_NE(error_of("(?=a)").find("lookaround"), std::string::npos);
  EXPECT_NE(error_of("(?<n>a)").find("named groups"), std::string::npos);
  EXPECT_NE(error_of("(?i)a").find("inline flags"), std::string::npos);
  EXPECT_NE(error_of("\\ba").find("word boundaries"), std::string::npos);
  EXPECT_NE(error_of("a^b").find("'^'"), std::string::npos);
  EXPECT_NE(error_of("a$b").find("'$'"), std::string::npos);
  EXPECT_NE(error_of("(a$)").find("'$'"), std::string::npos);
  EXPECT_NE(error_of("[]a]").find("[]"), std::string::npos);
  EXPECT_NE(error_of("a{,3}").find("{,n}"), std::string::npos);
  EXPECT_NE(error_of("*a").find("nothing to repeat"), std::string::npos);
  EXPECT_NE(error_of("a**").find("repeats a quantifier"), std::string::npos);
  EXPECT_NE(error_of("a{3,1}").find("m < n"), std::string::npos);
  EXPECT_NE(error_of("a{1001}").find("more than 1000"), std::string::npos);
  EXPECT_NE(error_of("(ab").find("never closed"), std::string::npos);
  EXPECT_NE(error_of("ab)").find("closes no group"), std::string::npos);
  EXPECT_NE(error_of("[ab").find("never closed"), std::string::npos);
  EXPECT_NE(error_of("[z-a]").find("before its start"), std::string::npos);
  EXPECT_NE(error_of("\\p{L}").find("\\p"), std::string::npos);
  EXPECT_NE(error_of("a\\").find("backslash"), std::string::npos);
  EXPECT_NE(error_of("^\xF0\x9F\x98\x80$").find("U+FFFF"), std::string::npos);
  EXPECT_NE(error_of("^[^\\x00-\\x{10}]").find("hex digits"), std::string::npos);
  // A huge expansion is refused rather than built.
  EXPECT_NE(error_of("^((a{1000}){1000}){1000}$").find("too large"), std::string::npos);
}

TEST(RegexSubset, EveryStateCanFinish) {
  for (const char* p : {"^(ab|cd)+e$", "^[0-9]{3}-[0-9]{4}$", "x", "^(a|b|c){2,5}d?$"}) {
    const StringAutomaton a = compile_pattern(p);
    for (uint32_t s = 0; s < a.size(); ++s) {
      // Some path from s reaches acceptance: breadth-first over edges.
      std::vector<uint8_t> seen(a.size(), 0);
      std::vector<uint32_t> queue = {s};
      bool found = false;
      for (size_t k = 0; k < queue.size() && !found; ++k) {
        found = a.accepting(queue[k]);
        for (const auto& e : a.edges(queue[k])) {
          if (!seen[e.to]) seen[e.to] = 1, queue.push_back(e.to);
        }
      }
      EXPECT_TRUE(found) << p << " state " << s;
    }
  }
}

TEST(RegexSubset, StatesThatLoopOnEverythingAreKnown) {
  const StringAutomaton a = compile_pattern("ab");  // anything, "ab", anything
  uint32_t s = StringAutomaton::start();
  EXPECT_FALSE(a.loops_on_everything(s));
  for (char c : std::string("xab")) s = static_cast<uint32_t>(a.next(s, static_cast<uint8_t>(c)));
  EXPECT_TRUE(a.loops_on_everything(s));
  EXPECT_FALSE(compile_pattern("^.*$").loops_on_everything(0));  // `.` leaves out line breaks
}

TEST(RegexSubset, UniversalStatesAreThoseThatNeverLeaveThem) {
  // After "ab" every string is accepted only while no length limit can end it: under maxLength
  // each state leads, step by step, to the last one, which has no edges, so none is universal.
  StringAutomaton bounded =
      StringAutomaton::intersect(compile_pattern("ab"), StringAutomaton::length_between(0, 50));
  ASSERT_TRUE(bounded.trim());
  for (uint32_t s = 0; s < bounded.size(); ++s) EXPECT_FALSE(bounded.loops_on_everything(s));
  StringAutomaton open = StringAutomaton::intersect(compile_pattern("ab"),
                                                    StringAutomaton::length_between(3, UINT32_MAX));
  ASSERT_TRUE(open.trim());
  uint32_t s = StringAutomaton::start();
  for (char c : std::string("abxy"))
    s = static_cast<uint32_t>(open.next(s, static_cast<uint8_t>(c)));
  EXPECT_TRUE(open.loops_on_everything(s));
  // Merged into one state: the tail of "ab" reached after 3 or more characters.
  uint32_t universal = 0;
  for (uint32_t k = 0; k < open.size(); ++k) universal += open.loops_on_everything(k);
  EXPECT_EQ(universal, 1u);
}

TEST(RegexSubset, LengthLimitsAndIntersection) {
  const StringAutomaton digits = compile_pattern("^[0-9]+$");
  StringAutomaton a = StringAutomaton::intersect(digits, StringAutomaton::length_between(2, 3));
  ASSERT_TRUE(a.trim());
  EXPECT_FALSE(accepts(a, "1"));
  EXPECT_TRUE(accepts(a, "12"));
  EXPECT_TRUE(accepts(a, "123"));
  EXPECT_FALSE(accepts(a, "1234"));
  EXPECT_FALSE(accepts(a, "1a"));
  StringAutomaton none =
      StringAutomaton::intersect(compile_pattern("^a{5}$"), StringAutomaton::length_between(0, 4));
  EXPECT_FALSE(none.trim());
  StringAutomaton open_ended = StringAutomaton::length_between(3, UINT32_MAX);
  EXPECT_FALSE(accepts(open_ended, "ab"));
  EXPECT_TRUE(accepts(open_ended, "abcdefgh"));
}

TEST(StringFormats, AcceptAndRefuseKnownStrings) {
  struct Case {
    const char* format;
    std::vector<std::string> ok, bad;
  };
  const Case cases[] = {
      {"date",
       {"2024-02-29", "2000-02-29", "1999-12-31", "0001-01-01", "2023-04-30"},
       {"2023-02-29", "1900-02-29", "2023-04-31", "2023-13-01", "0000-01-01", "2023-1-01",
        "2023-01-01T"}},
      {"time",
       {"12:30:00Z", "23:59:59.123+05:30", "00:00:00-00:00"},
       {"24:00:00Z", "12:60:00Z", "12:30:00", "12:30Z", "12:30:00z"}},
      {"date-time",
       {"2024-02-29T12:00:00Z", "1999-12-31T23:59:59.5-08:00"},
       {"2024-02-30T12:00:00Z", "2024-02-29 12:00:00Z", "2024-02-29T12:00:00"}},
      {"uuid",
       {"123e4567-e89b-12d3-a456-426614174000", "AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE"},
       {"123e4567e89b12d3a456426614174000", "123e4567-e89b-12d3-a456-42661417400g"}},
      {"email",
       {"a@b.co", "first.last+tag@mail.example.org"},
       {"a@b", "@b.co", "a.@b.co", "a@-b.co", "a b@c.de"}},
      {"ipv4", {"0.0.0.0", "192.168.1.255", "255.255.255.255"}, {"256.1.1.1", "01.2.3.4", "1.2.3"}},
      {"ipv6",
       {"::", "::1", "fe80::1", "2001:db8::8a2e:370:7334", "1:2:3:4:5:6:7:8",
        "1::", "1:2:3:4:5:6:7::"},
       {":::", "1:2:3:4:5:6:7:8:9", "1::2::3", "12345::", "1:2:3:4:5:6:7:8::"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.format);
    const char* pattern = string_format_pattern(c.format);
    ASSERT_NE(pattern, nullptr);
    const StringAutomaton a = compile_pattern(pattern);
    for (const auto& s : c.ok) EXPECT_TRUE(accepts(a, s)) << s;
    for (const auto& s : c.bad) EXPECT_FALSE(accepts(a, s)) << s;
  }
  EXPECT_EQ(string_format_pattern("uri"), nullptr);
  EXPECT_EQ(std::string(supported_string_formats()),
            "date, time, date-time, uuid, email, ipv4, ipv6");
}

}  // namespace
}  // namespace kiln::engine
