#include "kiln/engine/kv_pool.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <string>

#include "kiln/base/error.h"

namespace kiln::engine {
namespace {

KvPoolConfig small() { return KvPoolConfig{3, 2, 8, 4, 10}; }

TEST(KvPool, LayoutIsOneAlignedBlockKThenV) {
  KvPool pool(small());
  const size_t plane = 10 * 4 * 2 * 8;  // pages * page_size * heads * head_dim
  EXPECT_EQ(pool.bytes(), plane * 2 * 3 * sizeof(uint16_t));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(pool.data()) % 64, 0u);
  auto* base = static_cast<uint16_t*>(pool.data());
  for (int l = 0; l < 3; ++l) {
    auto v = pool.layer(l);
    EXPECT_EQ(v.k, base + l * plane);
    EXPECT_EQ(v.v, base + (3 + l) * plane);
    EXPECT_EQ(v.n_pages, 10);
    EXPECT_EQ(v.page_size, 4);
    EXPECT_EQ(v.n_kv_heads, 2);
    EXPECT_EQ(v.head_dim, 8);
  }
  // Writable end to end (ASan checks the bounds) and zero-initialized.
  EXPECT_EQ(pool.layer(2).v[plane - 1], 0);
  pool.layer(2).v[plane - 1] = 1;
  EXPECT_THROW(pool.layer(3), Error);
  EXPECT_THROW(pool.layer(-1), Error);
}

// q8: int8 K/V planes then the f32 scale planes, about half the bytes of f16 for the same
// pages (head_dim 8 here, so the scales weigh more than in a real model).
TEST(KvPool, Q8PoolHoldsInt8PlanesAndScales) {
  KvPoolConfig c = small();
  c.dtype = kernels::KvDtype::Q8;
  KvPool pool(c);
  const size_t plane = 10 * 4 * 2 * 8, scales = 10 * 4 * 2;
  EXPECT_EQ(pool.dtype(), kernels::KvDtype::Q8);
  EXPECT_EQ(pool.bytes(), plane * 2 * 3 + scales * 2 * 3 * sizeof(float));
  auto* base = static_cast<int8_t*>(pool.data());
  auto* scale_base = reinterpret_cast<float*>(base + plane * 2 * 3);
  for (int l = 0; l < 3; ++l) {
    auto v = pool.layer(l);
    EXPECT_EQ(v.dtype, kernels::KvDtype::Q8);
    EXPECT_EQ(v.k, nullptr);
    EXPECT_EQ(v.k8, base + l * plane);
    EXPECT_EQ(v.v8, base + (3 + l) * plane);
    EXPECT_EQ(v.k_scale, scale_base + l * scales);
    EXPECT_EQ(v.v_scale, scale_base + (3 + l) * scales);
  }
  EXPECT_EQ(pool.layer(2).v_scale[scales - 1], 0.0f);  // zeroed, in bounds
  KvPoolConfig f16 = small();
  KvPoolConfig big16{18, 1, 256, 16, 100}, big8 = big16;
  big8.dtype = kernels::KvDtype::Q8;
  // Gemma 3 270M's shape: q8 takes (256 + 4) / 512 of the f16 bytes.
  EXPECT_EQ(KvPool(big8).bytes() * 512, KvPool(big16).bytes() * 260);
  EXPECT_GT(KvPool(f16).bytes(), pool.bytes());
}

TEST(KvPool, RejectsBadConfig) {
  EXPECT_THROW(KvPool(KvPoolConfig{0, 1, 8, 4, 10}), Error);
  EXPECT_THROW(KvPool(KvPoolConfig{1, 1, 8, 0, 10}), Error);
  EXPECT_THROW(KvPool(KvPoolConfig{1, 1, 8, 4, 0}), Error);
  EXPECT_THROW(KvPool(KvPoolConfig{1, 1, 8, 4, int64_t{1} << 40}), Error);
}

// The pool's pages are mapped lazily, so a pool that could never fit must be refused up front
// (it would otherwise start and be killed once requests fill it).
TEST(KvPool, RefusesAPoolLargerThanTheMachine) {
  try {
    KvPool pool(KvPoolConfig{64, 8, 128, 1024, (int64_t{1} << 31) - 1});
    FAIL() << "a 512 PiB pool was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("exceeds this machine"), std::string::npos) << e.what();
  }
}

TEST(KvPool, AllocatesDistinctPagesAndRefusesOverdraw) {
  KvPool pool(small());
  std::vector<int32_t> a, b;
  ASSERT_TRUE(pool.alloc(6, a));
  EXPECT_EQ(a.front(), 0);  // lowest first
  EXPECT_FALSE(pool.alloc(5, b));
  EXPECT_TRUE(b.empty());  // a refused alloc takes nothing
  ASSERT_TRUE(pool.alloc(4, b));
  std::set<int32_t> all(a.begin(), a.end());
  all.insert(b.begin(), b.end());
  EXPECT_EQ(all.size(), 10u);
  EXPECT_EQ(pool.free_pages(), 0);
  pool.free(a);
  pool.free(b);
  EXPECT_EQ(pool.free_pages(), 10);
  EXPECT_EQ(pool.used_pages(), 0);
}

TEST(KvPool, DoubleFreeAndBadPagesAreErrorsThatChangeNothing) {
  KvPool pool(small());
  std::vector<int32_t> a;
  ASSERT_TRUE(pool.alloc(3, a));
  pool.free_page(a[0]);
  EXPECT_THROW(pool.free_page(a[0]), Error);
  EXPECT_THROW(pool.free({a[1], a[1]}), Error);  // duplicate inside one call
  EXPECT_EQ(pool.free_pages(), 8);               // and nothing was freed by it
  EXPECT_THROW(pool.free({a[1], 99}), Error);
  EXPECT_THROW(pool.free_page(-1), Error);
  EXPECT_EQ(pool.free_pages(), 8);
  pool.free({a[1], a[2]});
  EXPECT_EQ(pool.free_pages(), 10);
}

}  // namespace
}  // namespace kiln::engine
