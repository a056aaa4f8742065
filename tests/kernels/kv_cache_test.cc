#include "kiln/kernels/kv_cache.h"

#include <cmath>
#include <limits>

#include "kernel_test_util.h"
#include "kiln/base/error.h"
#include "kiln/base/half.h"

namespace kiln::kernels {
namespace {

using testing::random_floats;
using testing::run_group;

struct Pool {
  std::vector<uint16_t> k, v;
  KvLayerView view;
  Pool(int64_t pages, int page_size, int kv_heads, int hd)
      : k(pages * page_size * kv_heads * hd, 0xdead), v(k.size(), 0xbeef) {
    view = {k.data(), v.data(), pages, page_size, kv_heads, hd};
  }
};

class KvCacheTest : public testing::IsaTest {};

TEST_P(KvCacheTest, WritesRowsToSlotsWithF16Rounding) {
  for (int hd : {1, 7, 16, 33, 64, 256}) {
    const int kvh = 2, T = 13;
    Pool pool(8, 4, kvh, hd);
    auto k = random_floats(T * kvh * hd, hd, -70000.0f, 70000.0f);  // includes f16 overflow
    auto v = random_floats(T * kvh * hd, hd + 1, -1e-4f, 1e-4f);    // includes subnormals
    // Exact ties between two f16 values must round to even.
    k[0] = 1.0f + 1.0f / 2048.0f;
    k[1] = 1.0f + 3.0f / 2048.0f;
    std::vector<int32_t> slots = {5, -1, 0, 31, 6, 7, 1, 2, 3, -1, 30, 12, 13};
    run_group(2, [&](const ExecContext& ctx) {
      kv_write(k.data(), v.data(), slots.data(), T, pool.view, ctx);
    });
    std::vector<bool> written(32, false);
    for (int t = 0; t < T; ++t) {
      if (slots[t] < 0) continue;
      written[slots[t]] = true;
      for (int i = 0; i < kvh * hd; ++i) {
        ASSERT_EQ(pool.k[slots[t] * kvh * hd + i], f32_to_f16(k[t * kvh * hd + i]))
            << t << " " << i;
        ASSERT_EQ(pool.v[slots[t] * kvh * hd + i], f32_to_f16(v[t * kvh * hd + i]));
      }
    }
    for (int s = 0; s < 32; ++s) {
      if (!written[s]) {
        ASSERT_EQ(pool.k[s * kvh * hd], 0xdead) << "slot " << s << " touched";
      }
    }
    EXPECT_EQ(pool.k[slots[0] * kvh * hd + 0], 0x3c00);  // tie rounds down to even
    EXPECT_EQ(pool.k[slots[0] * kvh * hd + 1], 0x3c02);  // tie rounds up to even
  }
}

TEST_P(KvCacheTest, SlotOutsidePoolThrowsWithoutWriting) {
  Pool pool(2, 4, 1, 8);
  std::vector<float> k(16, 1.0f);
  std::vector<int32_t> slots = {0, 8};
  EXPECT_THROW(kv_write(k.data(), k.data(), slots.data(), 2, pool.view, ExecContext{}), Error);
  EXPECT_EQ(pool.k[0], 0xdead);
  KvLayerView bad = pool.view;
  bad.k = nullptr;
  EXPECT_THROW(kv_write(k.data(), k.data(), slots.data(), 1, bad, ExecContext{}), Error);
}

KILN_INSTANTIATE_ISA_TESTS(KvCacheTest);

}  // namespace
}  // namespace kiln::kernels
