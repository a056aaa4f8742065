#include "kiln/base/cache_eviction.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "kiln/graph/compile_cache.h"

namespace kiln::graph {
using cache_file::evict_least_recently_used;
namespace {

namespace fs = std::filesystem;
using std::chrono::hours;

class CacheEvictionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kiln-evict-test-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A file of `bytes` bytes last used `age` ago.
  fs::path make(const std::string& name, size_t bytes, fs::file_time_type::duration age) {
    const fs::path p = dir_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << std::string(bytes, 'x');
    fs::last_write_time(p, now_ - age);
    return p;
  }

  fs::path dir_;
  const fs::file_time_type now_ = fs::file_time_type::clock::now();
};

TEST_F(CacheEvictionTest, RemovesLeastRecentlyUsedEntriesUntilWithinTheBound) {
  const auto oldest = make("a.kpw", 1000, hours(30));
  const auto old = make("tp2-rank1/b.kgc", 100, hours(20));  // ranks' sub-folders count too
  const auto recent = make("c.kgc", 100, hours(10));
  const auto newest = make("d.kpw", 500, hours(1));
  const auto other = make("notes.txt", 5000, hours(40));  // not an entry: never touched
  const auto report = evict_least_recently_used(dir_.string(), 650, now_);
  EXPECT_EQ(report.files_removed, 2);
  EXPECT_EQ(report.bytes_removed, 1100u);
  EXPECT_EQ(report.bytes_kept, 600u);
  EXPECT_FALSE(fs::exists(oldest));
  EXPECT_FALSE(fs::exists(old));
  EXPECT_TRUE(fs::exists(recent));
  EXPECT_TRUE(fs::exists(newest));
  EXPECT_TRUE(fs::exists(other));
}

TEST_F(CacheEvictionTest, NothingGoesWhenWithinTheBound) {
  make("a.kgc", 100, hours(5));
  make("b.kpw", 100, hours(50));
  const auto report = evict_least_recently_used(dir_.string(), 200, now_);
  EXPECT_EQ(report.files_removed, 0);
  EXPECT_EQ(report.bytes_kept, 200u);
}

TEST_F(CacheEvictionTest, EntriesUsedByThisRunAreKeptEvenAboveTheBound) {
  const auto before = make("old.kgc", 10, hours(2));
  const auto mine1 = make("mine.kpw", 1000, -hours(0));
  const auto mine2 = make("mine.kgc", 10, -hours(0));
  const auto report = evict_least_recently_used(dir_.string(), 100, now_ - hours(1));
  EXPECT_EQ(report.files_removed, 1);
  EXPECT_FALSE(fs::exists(before));
  EXPECT_TRUE(fs::exists(mine1));
  EXPECT_TRUE(fs::exists(mine2));
  EXPECT_EQ(report.bytes_kept, 1010u);
}

TEST_F(CacheEvictionTest, MissingOrEmptyFolderIsEmpty) {
  EXPECT_EQ(evict_least_recently_used((dir_ / "absent").string(), 0, now_).bytes_kept, 0u);
  EXPECT_EQ(evict_least_recently_used("", 0, now_).files_removed, 0);
}

TEST_F(CacheEvictionTest, ACompileCacheHitMarksTheEntryUsed) {
  CompileCache cache(dir_.string());
  cache.store(7, "plan");
  cache.store(8, "other plan");
  fs::last_write_time(cache.path_for(7), now_ - hours(48));
  fs::last_write_time(cache.path_for(8), now_ - hours(24));
  ASSERT_TRUE(cache.load(7).has_value());  // 7 served now: 8 is the least recently used
  EXPECT_GE(fs::last_write_time(cache.path_for(7)), now_ - hours(1));
  evict_least_recently_used(dir_.string(), fs::file_size(cache.path_for(7)), now_ + hours(1));
  EXPECT_TRUE(fs::exists(cache.path_for(7)));
  EXPECT_FALSE(fs::exists(cache.path_for(8)));
}

}  // namespace
}  // namespace kiln::graph
