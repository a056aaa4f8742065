// Grammar token masks are exact: at every state a few grammars pass through (explored breadth
// first over a small vocabulary with multi-byte and partial characters), a token is allowed iff
// feeding its bytes to a copy of the matcher succeeds, end ids iff the sentence is complete;
// the mask cache returns the same masks and hits on states that recur.
#include "kiln/engine/grammar/grammar_token_mask.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <set>
#include <string>
#include <vector>

#include "kiln/engine/grammar/grammar_cache.h"
#include "kiln/engine/grammar/grammar_suffix_masks.h"
#include "kiln/engine/json/json_mask_cache.h"

namespace kiln::engine {
namespace {

const std::vector<std::string> kPieces = {
    "(",      ")",     "((", "))", "+",    "1",  "12",   "1+",   "a",        "ab",
    "b",      " ",     "\n", "\"", ",",    "x",  "\xC3", "\xA9", "\xC3\xA9", "\xE2\x82\xAC",
    "SELECT", " FROM", "*",  "id", "true", "n",  "null", "[",    "]",        "y",
    "yes",    "no",    "\\", "é,", "]]",   "],", "]]]",  "\"]",  "[[",       "[\"",
    "\",["};
constexpr int32_t kEos = 60;
constexpr int64_t kVocab = kEos + 1;

TokenTrie make_trie() { return TokenTrie::from_pieces(kPieces); }

const char* const kGrammars[] = {
    R"g(root ::= expr
expr ::= term ("+" term)*
term ::= [0-9]+ | "(" expr ")")g",
    R"g(root ::= "\"" [^"\\]* "\"" ("," root)?)g",
    R"g(root ::= "SELECT " ("*" | id (", " id)*) " FROM " id
id ::= [a-z]+)g",
    R"g(root ::= "yes" | "no" | "n" [a-z]{0,2})g",
    R"g(root ::= [é€a-b]{1,4} "\n"?)g",
    R"g(root ::= "[" (root ("," root)*)? "]" | "\"" [^"]* "\"" | "null")g",
};

std::vector<GrammarMatcher> states_of(const std::shared_ptr<const Grammar>& g, size_t depth_limit) {
  std::vector<GrammarMatcher> out;
  std::set<std::vector<uint32_t>> seen;
  std::deque<std::pair<GrammarMatcher, size_t>> queue;
  queue.emplace_back(GrammarMatcher(g), 0);
  while (!queue.empty() && out.size() < 300) {
    auto [m, depth] = queue.front();
    queue.pop_front();
    if (!seen.insert(m.state().data).second) continue;
    out.push_back(m);
    if (depth == depth_limit) continue;
    for (const std::string& p : kPieces) {
      GrammarMatcher next = m;
      if (next.feed(p)) queue.emplace_back(std::move(next), depth + 1);
    }
  }
  return out;
}

TEST(GrammarTokenMask, EqualsFeedingEveryTokenAtEveryState) {
  const TokenTrie trie = make_trie();
  const int32_t end_ids[] = {kEos};
  for (const char* text : kGrammars) {
    SCOPED_TRACE(text);
    auto g = compile_grammar_text(GrammarDialect::kGbnf, text);
    const std::vector<GrammarMatcher> states = states_of(g, 4);
    ASSERT_GE(states.size(), 4u);
    // First the plain walk at every state, then (with every stack's suffix class cached, as
    // after warm-up) the walk through the classes.
    for (int pass = 0; pass < 2; ++pass) {
      if (pass == 1) {
        for (const GrammarMatcher& m : states) {
          const std::vector<uint32_t>& d = m.state().data;
          for (size_t i = 0; i < d.size(); i += d[i] + 1) {
            const size_t k = std::min<size_t>(d[i], kGrammarSuffixLength);
            if (k == 0) continue;
            grammar_suffix_class(trie, g, std::span<const uint32_t>(d.data() + i + 1 + d[i] - k, k),
                                 k == d[i], kVocab);
          }
        }
      }
      for (const GrammarMatcher& m : states) {
        std::vector<uint8_t> allowed(kVocab);
        const int64_t count = pass == 0 ? grammar_allowed_tokens_plain(trie, m, end_ids, allowed)
                                        : grammar_allowed_tokens(trie, m, end_ids, allowed);
        int64_t expect_count = 0;
        for (size_t i = 0; i < kPieces.size(); ++i) {
          GrammarMatcher copy = m;
          const bool ok = copy.feed(kPieces[i]);
          EXPECT_EQ(allowed[i], ok ? 1 : 0) << "token '" << kPieces[i] << "'";
          expect_count += ok ? 1 : 0;
        }
        EXPECT_EQ(allowed[kEos], m.complete() ? 1 : 0);
        expect_count += m.complete() ? 1 : 0;
        EXPECT_EQ(count, expect_count);
      }
    }
  }
}

TEST(GrammarTokenMask, CacheServesTheSameMasksAndHitsRecurringStates) {
  const TokenTrie trie = make_trie();
  const int32_t end_ids[] = {kEos};
  JsonMaskCache cache(trie, kVocab, size_t{1} << 20);
  auto g = compile_grammar_text(GrammarDialect::kGbnf, kGrammars[1]);
  GrammarMatcher m(g);
  ASSERT_TRUE(m.feed("\""));
  const auto first = cache.get(m, end_ids);
  ASSERT_TRUE(m.feed("ab x"));  // the [^"]* loop: the same state again
  const auto again = cache.get(m, end_ids);
  EXPECT_EQ(first.get(), again.get());
  EXPECT_EQ(cache.stats().hits, 1u);
  const TokenMask fresh = compute_token_mask(trie, m, end_ids, kVocab);
  for (int64_t id = 0; id < kVocab; ++id) EXPECT_EQ(fresh.allows(id), again->allows(id));
  EXPECT_FALSE(again->allows(kEos));
  EXPECT_TRUE(again->allows(13));   // the closing quote
  EXPECT_FALSE(again->allows(32));  // a backslash
  // Another grammar's state is another key even where the stacks coincide.
  auto other = compile_grammar_text(GrammarDialect::kEbnf, kGrammars[1]);
  GrammarMatcher o(other);
  ASSERT_TRUE(o.feed("\""));
  EXPECT_NE(json_mask_key(o, end_ids), json_mask_key(m, end_ids));
}

}  // namespace
}  // namespace kiln::engine
