// Cached token masks: at every state a set of patterned and structured schemas passes through
// (explored breadth first over a small vocabulary), the cached mask equals a freshly computed
// one, on the first visit and on later ones; states that recur hit; the cache stays within its
// byte bound; and concurrent lookups from several threads agree.
#include "kiln/engine/json/json_mask_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <deque>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "kiln/engine/json/json_token_mask.h"

namespace kiln::engine {
namespace {

const std::vector<std::string> kPieces = {
    "{",  "}",   "[",    "]",    ",",    ":",   "\"", "\":", "\",\"", " ",    "a",    "ab",
    "<",  ">",   "<a>",  "x",    "1",    "12",  "-",  ".",   "true",  "null", "name", "\"name\":",
    "\\", "\\n", "\xC3", "\xA9", "2026", "-12", "T",  "0",   "Z",     "\"}",  "\"]",  "id"};
constexpr int32_t kEos = 100;
constexpr int64_t kVocab = kEos + 1;

TokenTrie make_trie() { return TokenTrie::from_pieces(kPieces); }

std::shared_ptr<const JsonSchema> compile(const char* text) {
  return JsonSchema::compile(nlohmann::json::parse(text));
}

const char* const kSchemas[] = {
    R"({"type": "string", "pattern": "^[^<>]*$"})",
    R"({"type": "string", "pattern": "^<a>(x|1)+$", "maxLength": 6})",
    R"({"type": "object", "properties": {"name": {"type": "string", "pattern": "^a[^<>]*$"},
        "id": {"type": "integer", "minimum": -12, "maximum": 12}}, "required": ["name"],
        "additionalProperties": false})",
    R"({"type": "array", "items": {"type": "string", "format": "date"}, "maxItems": 2})",
};

// Every state reachable within `max_tokens` tokens, each once (by its cache key).
std::vector<JsonMatcher> states_of(const std::shared_ptr<const JsonSchema>& schema,
                                   size_t max_tokens) {
  const int32_t end_ids[] = {kEos};
  std::vector<JsonMatcher> out;
  std::set<std::string> seen;
  std::deque<std::pair<JsonMatcher, size_t>> queue;
  queue.emplace_back(JsonMatcher(schema), 0);
  while (!queue.empty() && out.size() < 400) {
    auto [m, depth] = queue.front();
    queue.pop_front();
    if (!seen.insert(json_mask_key(m, end_ids)).second) continue;
    out.push_back(m);
    if (depth == max_tokens) continue;
    for (const std::string& piece : kPieces) {
      JsonMatcher next = m;
      if (next.feed(piece)) queue.emplace_back(std::move(next), depth + 1);
    }
  }
  return out;
}

TokenMask fresh(const TokenTrie& trie, const JsonMatcher& m, std::span<const int32_t> end_ids) {
  std::vector<uint8_t> allowed(kVocab);
  json_allowed_tokens(trie, m, end_ids, allowed);
  return TokenMask(allowed);
}

void expect_same(const TokenMask& a, const TokenMask& b, const std::string& where) {
  ASSERT_EQ(a.size(), b.size()) << where;
  EXPECT_EQ(a.allowed_count(), b.allowed_count()) << where;
  for (int64_t id = 0; id < a.size(); ++id) ASSERT_EQ(a.allows(id), b.allows(id)) << where << id;
}

TEST(JsonMaskCache, CachedMasksEqualFreshOnesAtEveryState) {
  const TokenTrie trie = make_trie();
  const int32_t end_ids[] = {kEos};
  JsonMaskCache cache(trie, kVocab, size_t{1} << 20);
  size_t states = 0;
  for (const char* text : kSchemas) {
    const auto schema = compile(text);
    const std::vector<JsonMatcher> all = states_of(schema, 4);
    states += all.size();
    for (int visit = 0; visit < 2; ++visit) {  // computed, then served from the cache
      for (const JsonMatcher& m : all) {
        expect_same(*cache.get(m, end_ids), fresh(trie, m, end_ids), text);
      }
    }
  }
  const JsonMaskCache::Stats s = cache.stats();
  EXPECT_EQ(s.misses, states);
  EXPECT_EQ(s.hits, states);
  EXPECT_GT(states, 50u);
}

TEST(JsonMaskCache, ThePatternedStringStateRecurs) {
  // Inside "^[^<>]*$" every plain token leads back to the same state: one walk serves them all.
  const TokenTrie trie = make_trie();
  const int32_t end_ids[] = {kEos};
  JsonMaskCache cache(trie, kVocab, size_t{1} << 20);
  JsonMatcher m(compile(kSchemas[0]));
  ASSERT_TRUE(m.feed("\"x"));  // past the automaton's start state
  for (const char* piece : {"a", "ab", "x", "12", "a"}) {
    cache.get(m, end_ids);
    ASSERT_TRUE(m.feed(piece));
  }
  EXPECT_EQ(cache.stats().misses, 1u);
  EXPECT_EQ(cache.stats().hits, 4u);
  EXPECT_FALSE(cache.get(m, end_ids)->allows(12));  // "<"
}

TEST(JsonMaskCache, EndIdsAndSchemasArePartOfTheKey) {
  const TokenTrie trie = make_trie();
  JsonMaskCache cache(trie, kVocab, size_t{1} << 20);
  const auto a = compile(R"({"type": "integer"})");
  const auto b = compile(R"({"type": "integer"})");  // equal text, another compiled copy
  JsonMatcher ma(a), mb(b);
  ASSERT_TRUE(ma.feed("1") && mb.feed("1"));
  const int32_t eos[] = {kEos}, other[] = {kEos - 1};
  EXPECT_TRUE(cache.get(ma, eos)->allows(kEos));
  EXPECT_FALSE(cache.get(ma, other)->allows(kEos));
  EXPECT_TRUE(cache.get(ma, other)->allows(kEos - 1));
  cache.get(mb, eos);
  EXPECT_EQ(cache.stats().misses, 3u);
}

TEST(JsonMaskCache, StaysWithinItsByteBound) {
  const TokenTrie trie = make_trie();
  const int32_t end_ids[] = {kEos};
  const size_t one = TokenMask(std::vector<uint8_t>(kVocab)).bytes();
  JsonMaskCache cache(trie, kVocab, one * 5);
  const auto schema = compile(kSchemas[2]);
  for (const JsonMatcher& m : states_of(schema, 3)) {
    expect_same(*cache.get(m, end_ids), fresh(trie, m, end_ids), "bounded");
    EXPECT_LE(cache.stats().bytes, one * 5);
  }
  EXPECT_GT(cache.stats().evictions, 0u);
  EXPECT_EQ(cache.stats().entries, 5u);
}

TEST(JsonMaskCache, ConcurrentLookupsAgree) {
  const TokenTrie trie = make_trie();
  const int32_t end_ids[] = {kEos};
  JsonMaskCache cache(trie, kVocab, size_t{1} << 20);
  const auto schema = compile(kSchemas[2]);
  const std::vector<JsonMatcher> all = states_of(schema, 3);
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = 0; i < all.size(); ++i) {
        const JsonMatcher& m = all[(i * 7 + static_cast<size_t>(t)) % all.size()];
        const TokenMask want = fresh(trie, m, end_ids);
        const auto got = cache.get(m, end_ids);
        for (int64_t id = 0; id < kVocab; ++id) wrong += got->allows(id) != want.allows(id);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST(TokenMask, ApplySetsOnlyDisallowedLogitsToMinusInfinity) {
  std::vector<uint8_t> allowed(130, 1);
  allowed[3] = allowed[64] = allowed[129] = 0;
  const TokenMask mask(allowed);
  std::vector<float> logits(131, 1.0f);  // one past the mask: disallowed
  mask.apply(logits);
  for (size_t i = 0; i < logits.size(); ++i) {
    const bool off = i == 3 || i == 64 || i == 129 || i == 130;
    EXPECT_EQ(std::isinf(logits[i]), off) << i;
  }
  EXPECT_EQ(mask.allowed_count(), 127);
}

}  // namespace
}  // namespace kiln::engine
