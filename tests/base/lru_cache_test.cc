// LruCache: the least recently used entries go first, past the count or the byte budget; a
// lookup refreshes an entry; the first insertion of a key wins; a value heavier than the whole
// budget is handed back but not kept.
#include "kiln/base/lru_cache.h"

#include <gtest/gtest.h>

#include <string>

namespace kiln {
namespace {

std::shared_ptr<const int> value(int v) { return std::make_shared<const int>(v); }

TEST(LruCache, DropsTheLeastRecentlyUsedPastTheCount) {
  LruCache<int> cache(2, 1000);
  cache.insert("a", value(1), 1);
  cache.insert("b", value(2), 1);
  ASSERT_NE(cache.find("a"), nullptr);  // "b" is now the oldest
  cache.insert("c", value(3), 1);
  EXPECT_EQ(cache.find("b"), nullptr);
  EXPECT_EQ(*cache.find("a"), 1);
  EXPECT_EQ(*cache.find("c"), 3);
  const auto s = cache.stats();
  EXPECT_EQ(s.entries, 2u);
  EXPECT_EQ(s.evictions, 1u);
  EXPECT_EQ(s.hits, 3u);
  EXPECT_EQ(s.misses, 1u);
}

TEST(LruCache, StaysWithinItsBytesAndKeepsTheFirstInsertion) {
  LruCache<int> cache(100, 10);
  cache.insert("a", value(1), 4);
  cache.insert("b", value(2), 4);
  EXPECT_EQ(*cache.insert("a", value(9), 4), 1);  // already there: the first one stays
  cache.insert("c", value(3), 4);                 // 12 bytes: "a", the oldest, goes
  EXPECT_EQ(cache.find("a"), nullptr);
  EXPECT_EQ(cache.stats().bytes, 8u);
  EXPECT_EQ(*cache.insert("huge", value(4), 11), 4);  // returned, not kept
  EXPECT_EQ(cache.find("huge"), nullptr);
  EXPECT_EQ(cache.stats().entries, 2u);
}

}  // namespace
}  // namespace kiln
