#include "kiln/engine/radix_cache.h"

#include <gtest/gtest.h>

#include <numeric>
#include <random>

#include "kiln/base/error.h"

namespace kiln::engine {
namespace {

constexpr int kPage = 4;

struct Fixture {
  KvPool pool{KvPoolConfig{1, 1, 4, kPage, 32}};
  RadixCache cache{pool};
  std::vector<int32_t> alloc(int64_t n) {
    std::vector<int32_t> p;
    EXPECT_TRUE(pool.alloc(n, p));
    return p;
  }
  void check_no_leak() {
    cache.check_invariants();
    EXPECT_EQ(pool.free_pages() + cache.cached_pages(), pool.n_pages());
  }
};

std::vector<int32_t> seq(int n, int start = 100) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), start);
  return v;
}

TEST(RadixCache, MatchesWholePagesOnly) {
  Fixture f;
  auto ids = seq(11);
  auto pages = f.alloc(2);
  f.cache.insert(ids, pages);  // 8 tokens cached; the partial third page never is
  EXPECT_EQ(f.cache.cached_pages(), 2);
  auto m = f.cache.match_prefix(ids);
  EXPECT_EQ(m.n_tokens, 8);
  EXPECT_EQ(m.pages, pages);
  auto shorter = f.cache.match_prefix(std::span<const int32_t>(ids.data(), 7));
  EXPECT_EQ(shorter.n_tokens, 4);  // splits the edge at the page boundary
  EXPECT_EQ(shorter.pages, std::vector<int32_t>{pages[0]});
  EXPECT_EQ(f.cache.node_count(), 2);
  auto other = seq(8, 500);
  EXPECT_EQ(f.cache.match_prefix(other).n_tokens, 0);
  f.check_no_leak();
}

TEST(RadixCache, InsertOfCachedTokensSwapsInTheCachedPagesAndFreesDuplicates) {
  Fixture f;
  auto ids = seq(12);
  auto a = f.alloc(3);
  f.cache.insert(ids, a);
  auto b = f.alloc(3);  // the same tokens computed again elsewhere
  const auto free_before = f.pool.free_pages();
  f.cache.insert(ids, b);
  EXPECT_EQ(b, a);  // the caller's table now points at the cached pages
  EXPECT_EQ(f.pool.free_pages(), free_before + 3);
  // Diverging after one page: the shared page stays, the rest becomes a new branch.
  auto ids2 = ids;
  ids2[5] = 7;
  auto c = f.alloc(3);
  const int32_t c1 = c[1], c2 = c[2];
  f.cache.insert(ids2, c);
  EXPECT_EQ(c[0], a[0]);
  EXPECT_EQ(c[1], c1);
  EXPECT_EQ(c[2], c2);
  EXPECT_EQ(f.cache.cached_pages(), 5);
  f.check_no_leak();
}

TEST(RadixCache, LockedNodesSurviveEvictionAndLruOrderIsRespected) {
  Fixture f;
  auto x = seq(8, 0), y = seq(8, 1000), z = seq(8, 2000);
  auto px = f.alloc(2), py = f.alloc(2), pz = f.alloc(2);
  f.cache.insert(x, px);
  f.cache.insert(y, py);
  f.cache.insert(z, pz);
  f.cache.match_prefix(x);  // x is now the most recently used
  auto mz = f.cache.match_prefix(z);
  f.cache.lock(mz.node);  // z is pinned
  EXPECT_EQ(f.cache.evictable_pages(), 4);
  EXPECT_EQ(f.cache.evict(1), 2);  // y: least recently used, evicted as a whole node
  EXPECT_EQ(f.cache.match_prefix(y).n_tokens, 0);
  EXPECT_EQ(f.cache.match_prefix(x).n_tokens, 8);
  EXPECT_EQ(f.cache.flush(), 2);  // x goes, pinned z stays
  EXPECT_EQ(f.cache.match_prefix(z).n_tokens, 8);
  EXPECT_EQ(f.cache.cached_pages(), 2);
  f.check_no_leak();
  f.cache.unlock(mz.node);
  EXPECT_THROW(f.cache.unlock(mz.node), Error);
  EXPECT_EQ(f.cache.flush(), 2);
  EXPECT_EQ(f.pool.free_pages(), f.pool.n_pages());
  f.check_no_leak();
}

TEST(RadixCache, EvictionWalksUpFromLeavesAndSplitKeepsLocks) {
  Fixture f;
  auto ids = seq(16);
  auto p = f.alloc(4);
  f.cache.insert(ids, p);
  auto m = f.cache.match_prefix(std::span<const int32_t>(ids.data(), 8));  // split at 2 pages
  f.cache.lock(m.node);
  auto branch = ids;
  branch[12] = 1;
  auto q = f.alloc(4);
  f.cache.insert(branch, q);  // shares 3 pages, adds one
  f.cache.check_invariants();
  EXPECT_EQ(f.cache.evictable_pages(), 3);  // pages 3, 4 of ids and the branch's last
  EXPECT_EQ(f.cache.flush(), 3);
  EXPECT_EQ(f.cache.cached_pages(), 2);
  f.cache.unlock(m.node);
  f.cache.flush();
  f.check_no_leak();
  EXPECT_EQ(f.cache.node_count(), 0);
}

TEST(RadixCache, ManyRandomOperationsNeverLeak) {
  Fixture f;
  std::mt19937 rng(1);
  std::vector<RadixCache::Node*> locked;
  for (int it = 0; it < 2000; ++it) {
    const int op = static_cast<int>(rng() % 4);
    std::vector<int32_t> ids(static_cast<size_t>(rng() % 20));
    for (auto& t : ids) t = static_cast<int32_t>(rng() % 3);  // few symbols: lots of sharing
    if (op == 0) {
      const int64_t n = static_cast<int64_t>(ids.size()) / kPage;
      if (f.pool.free_pages() < n) f.cache.evict(n - f.pool.free_pages());
      std::vector<int32_t> pages;
      if (!f.pool.alloc(n, pages)) continue;
      f.cache.insert(ids, pages);
    } else if (op == 1) {
      auto m = f.cache.match_prefix(ids);
      if (m.node) {
        f.cache.lock(m.node);
        locked.push_back(m.node);
      }
    } else if (op == 2 && !locked.empty()) {
      f.cache.unlock(locked.back());
      locked.pop_back();
    } else {
      f.cache.evict(static_cast<int64_t>(rng() % 4));
    }
    f.check_no_leak();
  }
  for (auto* n : locked) f.cache.unlock(n);
  f.cache.flush();
  EXPECT_EQ(f.pool.free_pages(), f.pool.n_pages());
}

}  // namespace
}  // namespace kiln::engine
