#include "kiln/engine/stop_checker.h"

#include <gtest/gtest.h>

#include "engine/fake_model.h"
#include "kiln/base/error.h"

namespace kiln::engine {
namespace {

using testing::FakeTokenizer;

struct Fed {
  std::vector<std::string> deltas;
  std::string text;
  StopUpdate last;
  int tokens = 0;
};

Fed feed(StopChecker& c, const std::vector<int32_t>& ids) {
  Fed r;
  for (int32_t t : ids) {
    StopUpdate u = c.on_token(t);
    ++r.tokens;
    r.deltas.push_back(u.text_delta);
    r.text += u.text_delta;
    r.last = u;
    if (u.finished) break;
  }
  return r;
}

const std::vector<int32_t> kEog{FakeTokenizer::kEos, FakeTokenizer::kEot};

// TokenText::stream (model::IncrementalDecoder over the vocabulary's token bytes).
TEST(TextStream, HoldsBackSplitUtf8) {
  FakeTokenizer tok;
  auto t = tok.stream(true);
  EXPECT_EQ(t->push(FakeTokenizer::letter('a')), "a");
  EXPECT_EQ(t->push(FakeTokenizer::kByteC3), "");  // half of "é"
  EXPECT_EQ(t->push(FakeTokenizer::kByteA9), "\xC3\xA9");
  EXPECT_EQ(t->push(FakeTokenizer::kEos), "");  // special, skipped
  EXPECT_EQ(t->push(FakeTokenizer::kByteC3), "");
  EXPECT_EQ(t->finish(), "\xEF\xBF\xBD");  // an unfinished character ends as U+FFFD
  EXPECT_EQ(t->finish(), "");              // and only once
}

TEST(TextStream, KeepsSpecialTokensUnlessSkipped) {
  FakeTokenizer tok;
  auto t = tok.stream(false);
  EXPECT_EQ(t->push(FakeTokenizer::letter('a')), "a");
  EXPECT_EQ(t->push(FakeTokenizer::kEos), "<eos>");
  EXPECT_EQ(t->push(FakeTokenizer::kSpace), " ");  // a leading space of a piece is real text
}

// A vocabulary of arbitrary byte strings: a three-byte character split 2 + 1, and a token
// that IS U+FFFD (a complete character like any other, released at once).
class BytesVocab : public TokenText {
 public:
  std::string decode(std::span<const int32_t> ids, bool) const override {
    static const char* const kPieces[] = {"ab", "\xE2\x82", "\xAC", "\xEF\xBF\xBD"};
    std::string s;
    for (int32_t id : ids) s += kPieces[id];
    return s;
  }
  bool is_end_of_generation(int32_t) const override { return false; }
  int64_t vocab_size() const override { return 4; }
};

TEST(TextStream, CompletesACharacterAcrossTokens) {
  BytesVocab vocab;
  auto t = vocab.stream(true);
  EXPECT_EQ(t->push(0), "ab");
  EXPECT_EQ(t->push(1), "");  // "\xE2\x82": two of the three bytes of the euro sign
  EXPECT_EQ(t->push(2), "\xE2\x82\xAC");
  EXPECT_EQ(t->push(3), "\xEF\xBF\xBD");
  EXPECT_EQ(t->finish(), "");
}

TEST(StopChecker, StopStringSplitAcrossTokensIsHeldBackAndCut) {
  FakeTokenizer tok;
  StopConditions sc;
  sc.max_new_tokens = 50;
  sc.stop_strings = {"end"};
  StopChecker c(sc, tok, true, kEog);
  Fed r = feed(c, tok.encode_letters("abc enxend"));
  // "en" is held while it may become "end", released when 'x' breaks it.
  EXPECT_EQ(r.deltas[0], "a");
  EXPECT_EQ(r.deltas[4], "");  // "e" held
  EXPECT_EQ(r.deltas[5], "");  // "en" held
  EXPECT_EQ(r.deltas[6], "enx");
  EXPECT_TRUE(r.last.finished);
  EXPECT_EQ(r.last.reason, FinishReason::Stop);
  EXPECT_EQ(r.last.matched_stop, "end");
  EXPECT_EQ(r.text, "abc enx");
  EXPECT_EQ(r.tokens, 10);
  for (const auto& d : r.deltas) EXPECT_EQ(d.find("end"), std::string::npos);
}

TEST(StopChecker, EarliestOfSeveralStopStringsWins) {
  FakeTokenizer tok;
  StopConditions sc;
  sc.max_new_tokens = 50;
  sc.stop_strings = {"cd", "bcx", "b"};
  StopChecker c(sc, tok, true, kEog);
  Fed r = feed(c, tok.encode_letters("abcd"));
  EXPECT_EQ(r.last.matched_stop, "b");
  EXPECT_EQ(r.text, "a");
}

TEST(StopChecker, StopStringAcrossAMultiByteCharacter) {
  FakeTokenizer tok;
  StopConditions sc;
  sc.max_new_tokens = 50;
  sc.stop_strings = {"\xC3\xA9t"};  // "ét"
  StopChecker c(sc, tok, true, kEog);
  Fed r = feed(c, {FakeTokenizer::letter('x'), FakeTokenizer::kByteC3, FakeTokenizer::kByteA9,
                   FakeTokenizer::letter('t'), FakeTokenizer::letter('y')});
  EXPECT_TRUE(r.last.finished);
  EXPECT_EQ(r.tokens, 4);
  EXPECT_EQ(r.text, "x");
}

TEST(StopChecker, EosAndStopTokensEndWithoutTheirText) {
  FakeTokenizer tok;
  StopConditions sc;
  sc.max_new_tokens = 50;
  sc.stop_token_ids = {FakeTokenizer::letter('z')};
  {
    StopChecker c(sc, tok, false, kEog);  // even with specials shown, EOS text is not emitted
    Fed r = feed(c, {FakeTokenizer::letter('a'), FakeTokenizer::kEot, FakeTokenizer::letter('b')});
    EXPECT_EQ(r.text, "a");
    EXPECT_EQ(r.last.reason, FinishReason::Stop);
    EXPECT_EQ(r.last.matched_stop_token, FakeTokenizer::kEot);
  }
  {
    StopChecker c(sc, tok, true, kEog);
    Fed r = feed(c, tok.encode_letters("abz"));
    EXPECT_EQ(r.text, "ab");
    EXPECT_EQ(r.last.matched_stop_token, FakeTokenizer::letter('z'));
  }
  {
    StopConditions ig = sc;
    ig.ignore_eos = true;
    StopChecker c(ig, tok, true, kEog);
    Fed r = feed(c, {FakeTokenizer::kEos, FakeTokenizer::letter('a'), FakeTokenizer::letter('z')});
    EXPECT_EQ(r.tokens, 3);
    EXPECT_EQ(r.last.matched_stop_token, FakeTokenizer::letter('z'));
  }
}

TEST(StopChecker, MaxTokensReleasesHeldText) {
  FakeTokenizer tok;
  StopConditions sc;
  sc.max_new_tokens = 3;
  sc.stop_strings = {"cde"};
  StopChecker c(sc, tok, true, kEog);
  Fed r = feed(c, tok.encode_letters("abcdef"));
  EXPECT_EQ(r.tokens, 3);
  EXPECT_EQ(r.deltas[2], "c");  // held "c" is released at the length limit
  EXPECT_EQ(r.text, "abc");
  EXPECT_EQ(r.last.reason, FinishReason::Length);
}

TEST(StopChecker, MinTokensSuppressesStops) {
  FakeTokenizer tok;
  StopConditions sc;
  sc.max_new_tokens = 10;
  sc.min_new_tokens = 3;
  sc.stop_token_ids = {FakeTokenizer::letter('z')};
  sc.stop_strings = {"a"};
  StopChecker c(sc, tok, true, kEog);
  // Banned ids while below the minimum: EOS tokens and stop ids.
  std::vector<int32_t> banned(c.banned_ids().begin(), c.banned_ids().end());
  EXPECT_EQ(banned, (std::vector<int32_t>{FakeTokenizer::kEos, FakeTokenizer::kEot,
                                          FakeTokenizer::letter('z')}));
  Fed r = feed(c, tok.encode_letters("zaaab"));
  // Tokens 1..3 may not stop, so "z" and "a" pass as text; the 4th ("a") stops.
  EXPECT_EQ(r.tokens, 4);
  EXPECT_EQ(r.text, "zaa");
  EXPECT_TRUE(c.banned_ids().empty());
  EXPECT_EQ(r.last.reason, FinishReason::Stop);
}

TEST(StopChecker, RejectsInvalidConditions) {
  FakeTokenizer tok;
  StopConditions sc;
  sc.max_new_tokens = 2;
  sc.min_new_tokens = 3;
  EXPECT_THROW(StopChecker(sc, tok, true, kEog), Error);
  sc.min_new_tokens = 0;
  sc.stop_strings = {""};
  EXPECT_THROW(StopChecker(sc, tok, true, kEog), Error);
  sc.stop_strings = {};
  sc.max_new_tokens = -1;
  EXPECT_THROW(StopChecker(sc, tok, true, kEog), Error);
}

}  // namespace
}  // namespace kiln::engine
