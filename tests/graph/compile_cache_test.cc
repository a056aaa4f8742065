#include "kiln/graph/compile_cache.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

namespace kiln::graph {
namespace {

class CompileCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("kiln-cache-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(CompileCacheTest, MissThenHit) {
  CompileCache cache(dir_.string());
  EXPECT_FALSE(cache.load(42).has_value());
  cache.store(42, "payload bytes");
  auto got = cache.load(42);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, "payload bytes");
  EXPECT_FALSE(cache.load(43).has_value());  // another key misses
}

TEST_F(CompileCacheTest, KeyChangesWithDescription) {
  EXPECT_NE(cache_key("kiln 0.1 bs=1,2"), cache_key("kiln 0.1 bs=1,2,3"));
  EXPECT_EQ(cache_key("same"), cache_key("same"));
}

// Every single-byte corruption and every truncation is detected and the entry removed.
TEST_F(CompileCacheTest, DamagedEntriesAreRejectedAndRemoved) {
  CompileCache cache(dir_.string());
  const std::string payload(300, 'x');
  cache.store(7, payload);
  const std::string path = cache.path_for(7);
  std::string good;
  {
    std::ifstream in(path, std::ios::binary);
    good.assign(std::istreambuf_iterator<char>(in), {});
  }
  for (size_t i = 0; i < good.size(); i += 7) {
    std::string bad = good;
    bad[i] = static_cast<char>(bad[i] ^ 0x5a);
    std::ofstream(path, std::ios::binary) << bad;
    EXPECT_FALSE(cache.load(7).has_value()) << "flip at " << i;
    EXPECT_FALSE(std::filesystem::exists(path));
  }
  for (size_t len : {size_t{0}, size_t{5}, good.size() / 2, good.size() - 1}) {
    std::ofstream(path, std::ios::binary) << good.substr(0, len);
    EXPECT_FALSE(cache.load(7).has_value()) << "truncated to " << len;
  }
  cache.store(7, payload);  // rebuilt
  EXPECT_EQ(cache.load(7).value_or(""), payload);
}

// An entry that is intact but was written by another format version (an older kiln) is not
// read as this version's payload: it misses, is removed, and the next store rebuilds it.
TEST_F(CompileCacheTest, EntriesOfAnotherFormatVersionAreRejected) {
  CompileCache cache(dir_.string());
  const std::string payload = R"({"plans": []})";
  cache.store(9, payload);
  const std::string path = cache.path_for(9);
  std::string current;
  {
    std::ifstream in(path, std::ios::binary);
    current.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::string magic = "KILN-COMPILE-CACHE v";
  ASSERT_EQ(current.compare(0, magic.size(), magic), 0);
  // Same header (key, size, checksum) and payload under other version numbers.
  const size_t digits_end = current.find('\n');
  ASSERT_NE(digits_end, std::string::npos);
  const std::string version = current.substr(magic.size(), digits_end - magic.size());
  for (const char* other : {"0", "1", "2", "3", "10"}) {
    if (other == version) continue;
    std::ofstream(path, std::ios::binary) << magic << other << current.substr(digits_end);
    EXPECT_FALSE(cache.load(9).has_value()) << "version " << other;
    EXPECT_FALSE(std::filesystem::exists(path)) << "version " << other;
  }
  cache.store(9, payload);
  EXPECT_EQ(cache.load(9).value_or(""), payload);
}

TEST_F(CompileCacheTest, DisabledCacheNeverHits) {
  CompileCache cache("");
  cache.store(1, "x");
  EXPECT_FALSE(cache.load(1).has_value());
}

// Readers racing a writer see the old entry or the new one, never a torn one.
TEST_F(CompileCacheTest, ConcurrentReadersNeverSeeHalfWrittenEntries) {
  CompileCache cache(dir_.string());
  const std::string a(1 << 16, 'a'), b(1 << 16, 'b');
  cache.store(9, a);
  std::atomic<bool> stop{false};
  std::atomic<int> bad{0};
  std::thread reader([&] {
    while (!stop) {
      auto got = cache.load(9);
      if (got && *got != a && *got != b) ++bad;
    }
  });
  for (int i = 0; i < 50; ++i) cache.store(9, i % 2 ? a : b);
  stop = true;
  reader.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace kiln::graph
