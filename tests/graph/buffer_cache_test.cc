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

}  // namespace
}  // namespace kiln::graph
