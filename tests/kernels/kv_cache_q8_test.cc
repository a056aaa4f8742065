// The q8 KV cache: the scalar quantization reference, kv_write and the fused
// qk-norm+rope+kv-write kernel against it (bit for bit, every ISA), and the pool layout.
#include <cmath>
#include <set>

#include "kernel_test_util.h"
#include "kiln/base/error.h"
#include "kiln/kernels/kv_cache.h"
#include "kv_q8_pool.h"
#include "qk_rope_cases.h"

namespace kiln::kernels {
namespace {

using testing::kQ8Sentinel;
using testing::kScaleSentinel;
using testing::Q8Pool;
using testing::random_floats;
using testing::run_group;

TEST(QuantizeQ8Reference, ScaleRoundingAndError) {
  // amax 127 makes the multiplier exactly 1: the values themselves are rounded.
  std::vector<float> x = {127.0f, 2.5f, 3.5f, -2.5f, -0.5f, 0.49f, -127.0f, 1.5f};
  std::vector<int8_t> q(x.size());
  EXPECT_EQ(quantize_q8_block_ref(x.data(), q.data(), int64_t(x.size())), 1.0f);
  EXPECT_EQ(q, (std::vector<int8_t>{127, 2, 4, -2, 0, 0, -127, 2}));  // ties to even
  // All zeros: scale 0, values 0 (no division by zero).
  std::vector<float> z(5, 0.0f);
  std::vector<int8_t> qz(5, 9);
  EXPECT_EQ(quantize_q8_block_ref(z.data(), qz.data(), 5), 0.0f);
  EXPECT_EQ(qz, std::vector<int8_t>(5, 0));
  // Random blocks: the largest magnitude maps to +-127 and every value is within half a step.
  for (int n : {1, 16, 64, 256}) {
    auto r = random_floats(n, n, -3.0f, 5.0f);
    std::vector<int8_t> qr(n);
    const float scale = quantize_q8_block_ref(r.data(), qr.data(), n);
    float amax = 0;
    int peak = 0;
    for (int i = 0; i < n; ++i) {
      amax = std::max(amax, std::fabs(r[i]));
      peak = std::max(peak, std::abs(int(qr[i])));
    }
    EXPECT_EQ(scale, amax / 127.0f);
    EXPECT_EQ(peak, 127);
    for (int i = 0; i < n; ++i) EXPECT_LE(std::fabs(qr[i] * scale - r[i]), 0.5001f * scale) << i;
  }
}

TEST(KvDtype, ParsesNamesAndRejectsOthers) {
  EXPECT_EQ(parse_kv_dtype("f16"), KvDtype::F16);
  EXPECT_EQ(parse_kv_dtype("q8"), KvDtype::Q8);
  EXPECT_STREQ(kv_dtype_name(KvDtype::Q8), "q8");
  EXPECT_STREQ(kv_dtype_name(KvDtype::F16), "f16");
  try {
    parse_kv_dtype("q4");
    FAIL() << "q4 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected f16 or q8"), std::string::npos) << e.what();
  }
}

TEST(KvLayout, Q8HalvesTheBytesAndLayersDoNotOverlap) {
  KvGeometry g{3, 10, 4, 2, 64, KvDtype::F16};
  EXPECT_EQ(kv_bytes_per_token(g), size_t(2 * 3 * 2 * 64 * 2));
  EXPECT_EQ(kv_pool_bytes(g), kv_bytes_per_token(g) * 40);
  g.dtype = KvDtype::Q8;
  EXPECT_EQ(kv_bytes_per_token(g), size_t(2 * 3 * 2 * (64 + 4)));
  const size_t bytes = kv_pool_bytes(g);
  EXPECT_GE(bytes, kv_bytes_per_token(g) * 40);
  EXPECT_LT(bytes, kv_bytes_per_token(g) * 40 + 64);
  std::vector<char> pool(bytes);
  // Every byte of the pool belongs to exactly one (layer, plane, slot): mark them all.
  std::vector<int> owner(bytes, 0);
  const int64_t slots = g.n_pages * g.page_size;
  auto mark = [&](const void* p, size_t n) {
    const size_t off = size_t(static_cast<const char*>(p) - pool.data());
    ASSERT_LE(off + n, bytes);
    for (size_t i = 0; i < n; ++i) ++owner[off + i];
  };
  for (int l = 0; l < g.n_layers; ++l) {
    KvLayerView v = kv_layer_view(g, pool.data(), l);
    check_kv_view(v);
    EXPECT_EQ(v.k, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(v.k_scale) % alignof(float), 0u);
    mark(v.k8, size_t(slots * v.row_elems()));
    mark(v.v8, size_t(slots * v.row_elems()));
    mark(v.k_scale, size_t(slots * g.n_kv_heads) * sizeof(float));
    mark(v.v_scale, size_t(slots * g.n_kv_heads) * sizeof(float));
  }
  size_t used = 0;
  for (int c : owner) {
    EXPECT_LE(c, 1);
    used += size_t(c);
  }
  EXPECT_EQ(used, kv_bytes_per_token(g) * size_t(slots));
  EXPECT_THROW(kv_layer_view(g, pool.data(), 3), Error);
  g.n_kv_heads = 0;
  EXPECT_THROW(kv_pool_bytes(g), Error);
}

class KvCacheQ8Test : public testing::IsaTest {};

// The pool after kv_write equals the scalar reference block by block, untouched slots keep
// their sentinels.
void expect_matches_reference(const Q8Pool& pool, const std::vector<float>& k,
                              const std::vector<float>& v, const std::vector<int32_t>& slots,
                              int kvh, int hd) {
  std::set<int32_t> written;
  std::vector<int8_t> want(hd);
  for (size_t t = 0; t < slots.size(); ++t) {
    if (slots[t] < 0) continue;
    written.insert(slots[t]);
    for (int h = 0; h < kvh; ++h) {
      const int64_t src = (int64_t(t) * kvh + h) * hd, dst = (int64_t(slots[t]) * kvh + h) * hd;
      const int64_t s = int64_t(slots[t]) * kvh + h;
      for (int plane = 0; plane < 2; ++plane) {
        const float* x = (plane == 0 ? k : v).data() + src;
        const float scale = quantize_q8_block_ref(x, want.data(), hd);
        ASSERT_EQ((plane == 0 ? pool.ks : pool.vs)[s], scale) << t << " " << h << " " << plane;
        const auto& got = plane == 0 ? pool.k8 : pool.v8;
        for (int i = 0; i < hd; ++i)
          ASSERT_EQ(got[dst + i], want[i]) << "row " << t << " head " << h << " dim " << i;
      }
    }
  }
  for (int64_t s = 0; s < pool.view.n_slots(); ++s) {
    if (written.count(int32_t(s))) continue;
    ASSERT_EQ(pool.k8[s * kvh * hd], kQ8Sentinel) << "slot " << s << " touched";
    ASSERT_EQ(pool.ks[s * kvh], kScaleSentinel) << "slot " << s << " touched";
  }
}

TEST_P(KvCacheQ8Test, KvWriteEqualsScalarReference) {
  for (int hd : {1, 7, 16, 33, 64, 256}) {
    const int kvh = 2, T = 13;
    Q8Pool pool(8, 4, kvh, hd);
    auto k = random_floats(T * kvh * hd, hd, -70000.0f, 70000.0f);
    auto v = random_floats(T * kvh * hd, hd + 1, -1e-4f, 1e-4f);
    for (int i = 0; i < hd; ++i) v[i] = 0.0f;  // an all-zero block
    std::vector<int32_t> slots = {5, -1, 0, 31, 6, 7, 1, 2, 3, -1, 30, 12, 13};
    for (int nth : {1, 2}) {
      run_group(nth, [&](const ExecContext& ctx) {
        kv_write(k.data(), v.data(), slots.data(), T, pool.view, ctx);
      });
      expect_matches_reference(pool, k, v, slots, kvh, hd);
    }
  }
}

TEST_P(KvCacheQ8Test, SlotOutsidePoolOrMissingScalesThrow) {
  Q8Pool pool(2, 4, 1, 8);
  std::vector<float> k(16, 1.0f);
  std::vector<int32_t> slots = {0, 8};
  EXPECT_THROW(kv_write(k.data(), k.data(), slots.data(), 2, pool.view, ExecContext{}), Error);
  EXPECT_EQ(pool.k8[0], kQ8Sentinel);
  KvLayerView bad = pool.view;
  bad.v_scale = nullptr;
  EXPECT_THROW(kv_write(k.data(), k.data(), slots.data(), 1, bad, ExecContext{}), Error);
}

TEST_P(KvCacheQ8Test, FusedQkNormRopeKvWriteEqualsUnfusedAndReference) {
  using testing::QkRopeCase;
  for (QkRopeCase c : {QkRopeCase{1, 4, 1, 256, true, true}, QkRopeCase{7, 4, 1, 256, true, true},
                       QkRopeCase{5, 8, 2, 64, false, true}, QkRopeCase{3, 2, 2, 14, true, true},
                       QkRopeCase{33, 4, 2, 128, true, false}}) {
    const testing::QkRopeInputs in = testing::make_qk_rope_inputs(c);
    // Unfused: rms_norm per head, rope, kv_write (q8).
    Q8Pool unfused(testing::kQkRopePages, testing::kQkRopePageSize, c.KH, c.hd);
    std::vector<float> qn, kn;
    testing::unfused_norm_rope(c, in, qn, kn);
    kv_write(kn.data(), in.v.data(), in.slots.data(), c.T, unfused.view, ExecContext{});
    expect_matches_reference(unfused, kn, in.v, in.slots, c.KH, c.hd);

    for (int nth : {1, 2, 3}) {
      Q8Pool fused(testing::kQkRopePages, testing::kQkRopePageSize, c.KH, c.hd);
      const auto qo = testing::run_fused_qk_norm_rope_kv_write(c, in, fused.view, nth);
      ASSERT_TRUE(testing::bits_equal(qo, qn)) << "q, " << nth << " threads";
      ASSERT_EQ(fused.k8, unfused.k8) << nth << " threads";
      ASSERT_EQ(fused.v8, unfused.v8) << nth << " threads";
      ASSERT_TRUE(testing::bits_equal(fused.ks, unfused.ks));
      ASSERT_TRUE(testing::bits_equal(fused.vs, unfused.vs));
    }
  }
}

KILN_INSTANTIATE_ISA_TESTS(KvCacheQ8Test);

}  // namespace
}  // namespace kiln::kernels
