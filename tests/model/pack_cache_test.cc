// The on-disk cache of packed merged weights (WeightStore::set_pack_cache_dir): a miss packs
// and stores, a hit gives the same bytes without packing, a damaged entry is repacked (never
// trusted), and a weight whose parts changed never hits the old entry.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>

#include "kiln/graph/ir.h"
#include "kiln/model/tensor_source.h"
#include "kiln/model/weight_store.h"

namespace kiln::model {
namespace {

namespace fs = std::filesystem;

// Three F32 matrices in memory, named like one layer's Q, K and V.
class MemorySource : public TensorSource {
 public:
  explicit MemorySource(uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> d;
    for (const auto& [name, rows] :
         {std::pair<std::string, int64_t>{"q", 64}, {"k", 32}, {"v", 32}}) {
      auto& v = data_[name];
      v.resize(static_cast<size_t>(rows * kK));
      for (float& x : v) x = d(rng);
      rows_[name] = rows;
    }
  }
  bool has_tensor(const std::string& name) const override { return data_.count(name) > 0; }
  StoredTensorInfo tensor_info(const std::string& name) const override {
    return {DType::F32, "f32", Shape({rows_.at(name), kK})};
  }
  Tensor tensor(const std::string& name) const override {
    return Tensor::borrow(DType::F32, Shape({rows_.at(name), kK}),
                          const_cast<float*>(data_.at(name).data()));
  }
  int64_t parameter_count() const override { return 128 * kK; }
  std::vector<float>& mutable_data(const std::string& name) { return data_.at(name); }

  static constexpr int64_t kK = 64;

 private:
  std::map<std::string, std::vector<float>> data_;
  std::map<std::string, int64_t> rows_;
};

graph::Node merged_qkv() {
  graph::Node n;
  n.op = graph::Op::Param;
  n.attrs.set("concat", std::vector<std::string>{"q", "k", "v"});
  n.outputs.push_back({DType::F32, Shape({128, MemorySource::kK})});
  return n;
}

struct Packed {
  std::vector<uint8_t> bytes;
  PackStats stats;
};

Packed pack_with_cache(const std::shared_ptr<MemorySource>& src, const std::string& dir) {
  WeightStore store(std::static_pointer_cast<const TensorSource>(src));
  store.set_pack_cache_dir(dir);
  const kernels::PackedWeight& w = store.packed(merged_qkv());
  return {std::vector<uint8_t>(w.data(), w.data() + w.bytes()), store.pack_stats()};
}

class PackCache : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("kiln-pack-cache-test-" +
            std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::vector<fs::path> entries() const {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.push_back(e.path());
    return out;
  }
  fs::path dir_;
};

TEST_F(PackCache, MissStoresThenHitGivesTheSameBytes) {
  auto src = std::make_shared<MemorySource>(1);
  const Packed first = pack_with_cache(src, dir_.string());
  EXPECT_EQ(first.stats.cache_hits, 0);
  EXPECT_EQ(first.stats.cache_stores, 1);
  ASSERT_EQ(entries().size(), 1u);
  const Packed second = pack_with_cache(src, dir_.string());
  EXPECT_EQ(second.stats.cache_hits, 1);
  EXPECT_EQ(second.stats.cache_stores, 0);
  EXPECT_EQ(second.bytes, first.bytes);
  // Without the cache the packer gives exactly these bytes too.
  const Packed plain = pack_with_cache(src, "");
  EXPECT_EQ(plain.bytes, first.bytes);
  EXPECT_EQ(plain.stats.cache_hits + plain.stats.cache_stores, 0);
}

TEST_F(PackCache, ADamagedEntryIsRepackedNotTrusted) {
  auto src = std::make_shared<MemorySource>(2);
  const Packed first = pack_with_cache(src, dir_.string());
  ASSERT_EQ(entries().size(), 1u);
  const fs::path entry = entries()[0];
  {  // flip one byte of the packed data (the file's last byte)
    std::fstream f(entry, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-1, std::ios::end);
    char c = 0;
    f.get(c);
    f.seekp(-1, std::ios::end);
    f.put(static_cast<char>(c ^ 0x5a));
  }
  const Packed second = pack_with_cache(src, dir_.string());
  EXPECT_EQ(second.stats.cache_hits, 0);
  EXPECT_EQ(second.stats.cache_stores, 1);
  EXPECT_EQ(second.bytes, first.bytes);
  // A truncated entry likewise.
  fs::resize_file(entries()[0], 100);
  const Packed third = pack_with_cache(src, dir_.string());
  EXPECT_EQ(third.stats.cache_hits, 0);
  EXPECT_EQ(third.bytes, first.bytes);
}

TEST_F(PackCache, ChangedWeightsNeverHitTheOldEntry) {
  auto src = std::make_shared<MemorySource>(3);
  const Packed first = pack_with_cache(src, dir_.string());
  src->mutable_data("k")[17] += 1.0f;  // same names, dtypes and shapes: only the bytes differ
  const Packed second = pack_with_cache(src, dir_.string());
  EXPECT_EQ(second.stats.cache_hits, 0);
  EXPECT_EQ(second.stats.cache_stores, 1);
  EXPECT_NE(second.bytes, first.bytes);
  EXPECT_EQ(entries().size(), 2u);
}

TEST(PackedWeightBytes, RoundTripAndRejectsForeignBytes) {
  auto src = std::make_shared<MemorySource>(4);
  const auto w =
      kernels::PackedWeight::pack_concat({src->tensor("q"), src->tensor("k"), src->tensor("v")});
  const std::string bytes = w.serialize();
  auto back = kernels::PackedWeight::deserialize(bytes);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->n(), w.n());
  EXPECT_EQ(back->segments().size(), 3u);
  EXPECT_EQ(std::memcmp(back->data(), w.data(), w.bytes()), 0);
  EXPECT_FALSE(kernels::PackedWeight::deserialize(bytes.substr(0, bytes.size() - 1)));
  EXPECT_FALSE(kernels::PackedWeight::deserialize("not a packed weight"));
  std::string bad_offset = bytes;
  bad_offset[8 + 40 + 40] ^= 1;  // the first segment's group_bytes
  EXPECT_FALSE(kernels::PackedWeight::deserialize(bad_offset));
}

}  // namespace
}  // namespace kiln::model
