#include "kiln/graph/buffer_cache.h"

#include <gtest/gtest.h>

#include <cstring>

namespace kiln::graph {
namespace {

TEST(BufferCache, ADroppedBufferIsReusedBySameSizeClass) {
  auto cache = std::make_shared<BufferCache>();
  void* first = nullptr;
  {
    Tensor a = BufferCache::allocate(cache, DType::F32, Shape{1000});
    first = a.data();
    Tensor view = a.reshaped(Shape{10, 100});  // a view keeps the buffer
    a = Tensor();
    EXPECT_EQ(cache->cached_bytes(), 0u);
  }
  EXPECT_EQ(cache->cached_bytes(), 4096u);  // 4000 bytes, rounded to the 4 KiB class
  Tensor b = BufferCache::allocate(cache, DType::F32, Shape{900});  // same class
  EXPECT_EQ(b.data(), first);
  EXPECT_EQ(cache->cached_bytes(), 0u);
  EXPECT_EQ(cache->allocated_bytes(), 4096u);
  Tensor c = BufferCache::allocate(cache, DType::F32, Shape{2000});  // another class
  EXPECT_NE(c.data(), first);
  EXPECT_EQ(cache->allocated_bytes(), 4096u + 8192u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(c.data()) % 64, 0u);
}

TEST(BufferCache, KeepsAtMostItsLimitAndOutlivesItsOwner) {
  Tensor survivor;
  {
    auto cache = std::make_shared<BufferCache>(8192);
    Tensor a = BufferCache::allocate(cache, DType::I8, Shape{8192});
    Tensor b = BufferCache::allocate(cache, DType::I8, Shape{8192});
    survivor = BufferCache::allocate(cache, DType::I8, Shape{100});
    a = Tensor();
    b = Tensor();  // over the limit: freed, not cached
    EXPECT_EQ(cache->cached_bytes(), 8192u);
  }
  // The cache is gone from its owner but the tensor still holds it: writing is safe (ASan).
  std::memset(survivor.data(), 1, 100);
  EXPECT_EQ(static_cast<uint8_t*>(survivor.data())[99], 1);
}

// Every prefill length from 1 to 512 tokens of a 640-wide f32 activation (2.5 KiB .. 1.25 MiB):
// the buffers the cache ever allocates stay within a few times the largest, because sizes fall
// into geometric classes (with one class per 4 KiB they summed to ~130 MiB).
TEST(BufferCache, ManyDistinctSizesShareAFewClasses) {
  auto cache = std::make_shared<BufferCache>();
  const size_t largest = 512 * 640 * 4;
  for (int64_t t = 1; t <= 512; ++t) {
    Tensor a = BufferCache::allocate(cache, DType::F32, Shape{t, 640});
    ASSERT_GE(cache->allocated_bytes(), static_cast<size_t>(t) * 640 * 4);
  }
  EXPECT_LE(cache->allocated_bytes(), 8 * largest);
  EXPECT_EQ(cache->cached_bytes(), cache->allocated_bytes());
  // Every class is at most 25% above what was asked for (above the 4 KiB granules).
  for (size_t bytes : {size_t{65537}, size_t{100000}, size_t{1} << 20, size_t{3} << 20}) {
    auto c = std::make_shared<BufferCache>();
    Tensor a = BufferCache::allocate(c, DType::I8, Shape{static_cast<int64_t>(bytes)});
    EXPECT_GE(c->allocated_bytes(), bytes);
    EXPECT_LE(c->allocated_bytes(), bytes + bytes / 4) << bytes;
  }
}

}  // namespace
}  // namespace kiln::graph
