// PackedWeightsFileWriter's own edges, below the Runtime-level tests
// (tests/engine/packed_weights_cache_test.cc): a weight packed into the file round-trips through
// load_packed_weights_file; running out of reserved space hands out nothing (the caller packs
// elsewhere) and finish() then refuses rather than writing an entry that points outside its
// data; an unfinished writer leaves no file behind.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "kiln/base/tensor.h"
#include "kiln/model/packed_weights_file.h"

namespace kiln::model {
namespace {

namespace fs = std::filesystem;

class PackedWeightsFileWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kiln-kpw-writer-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    for (size_t i = 0; i < source_.size(); ++i) source_[i] = static_cast<float>(i % 7) - 3.0f;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A 32 x 64 f32 weight packed with `alloc`.
  kernels::PackedWeight pack(const kernels::PackedAllocator& alloc) {
    return kernels::PackedWeight::pack(Tensor::borrow(DType::F32, Shape{32, 64}, source_.data()),
                                       alloc);
  }
  std::string path() const { return (dir_ / "0000000000000007.kpw").string(); }

  fs::path dir_;
  std::vector<float> source_ = std::vector<float>(32 * 64);
};

TEST_F(PackedWeightsFileWriterTest, PackedIntoTheFileLoadsBackTheSameBytes) {
  auto writer = PackedWeightsFileWriter::create(path(), 7, 1 << 20);
  ASSERT_NE(writer, nullptr);
  const auto w = pack([&](size_t n) { return writer->allocate(n); });
  ASSERT_TRUE(writer->finish({{"w", &w}}));
  auto loaded = load_packed_weights_file(path(), 7);
  ASSERT_TRUE(loaded.has_value());
  ASSERT_EQ(loaded->size(), 1u);
  EXPECT_EQ((*loaded)[0].first, "w");
  ASSERT_EQ((*loaded)[0].second.bytes(), w.bytes());
  EXPECT_EQ(std::memcmp((*loaded)[0].second.data(), w.data(), w.bytes()), 0);
  EXPECT_FALSE(load_packed_weights_file(path(), 8).has_value());  // another key
}

TEST_F(PackedWeightsFileWriterTest, OutOfReservedSpaceIsRefusedNotWrittenPastTheEnd) {
  auto writer = PackedWeightsFileWriter::create(path(), 7, 1024);  // less than one weight
  ASSERT_NE(writer, nullptr);
  EXPECT_EQ(writer->allocate(1 << 20), nullptr);
  // Packed elsewhere (as WeightStore falls back to its arena): not part of the file.
  const auto w = pack({});
  EXPECT_FALSE(writer->finish({{"w", &w}}));
  writer.reset();
  EXPECT_FALSE(fs::exists(path()));
  EXPECT_TRUE(fs::is_empty(dir_));  // the temporary file is gone too
}

TEST_F(PackedWeightsFileWriterTest, AnUnfinishedWriterLeavesNoFile) {
  {
    auto writer = PackedWeightsFileWriter::create(path(), 7, 1 << 20);
    ASSERT_NE(writer, nullptr);
    const auto w = pack([&](size_t n) { return writer->allocate(n); });
    EXPECT_GT(w.bytes(), 0u);
  }
  EXPECT_TRUE(fs::is_empty(dir_));
}

TEST_F(PackedWeightsFileWriterTest, AFolderThatCannotBeMadeGivesNoWriter) {
  fs::create_directories(dir_);
  const fs::path blocker = dir_ / "file";
  std::FILE* f = std::fopen(blocker.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fclose(f);
  EXPECT_EQ(PackedWeightsFileWriter::create((blocker / "x.kpw").string(), 7, 1 << 20), nullptr);
}

}  // namespace
}  // namespace kiln::model
