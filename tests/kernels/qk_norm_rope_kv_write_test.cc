#include "kiln/kernels/qk_norm_rope_kv_write.h"

#include "kernel_test_util.h"
#include "kiln/base/error.h"
#include "kiln/kernels/norm.h"
#include "kiln/kernels/rope.h"
#include "qk_rope_cases.h"

namespace kiln::kernels {
namespace {

using testing::bits_equal;
using testing::random_floats;
using testing::run_group;

class QkNormRopeKvWriteTest : public testing::IsaTest {};

using testing::QkRopeCase;

TEST_P(QkNormRopeKvWriteTest, BitIdenticalToNormRopeKvWrite) {
  for (QkRopeCase c :
       {QkRopeCase{1, 4, 1, 256, true, true}, QkRopeCase{7, 4, 1, 256, true, true},
        QkRopeCase{5, 8, 2, 64, false, true}, QkRopeCase{3, 2, 2, 14, true, true},
        QkRopeCase{33, 4, 2, 128, true, false}, QkRopeCase{4, 6, 3, 30, false, false}}) {
    const int page_size = testing::kQkRopePageSize;
    const int64_t pages = testing::kQkRopePages;
    const testing::QkRopeInputs in = testing::make_qk_rope_inputs(c);
    const size_t pool_elems = pages * page_size * c.KH * c.hd;

    // Unfused: rms_norm per head, rope, kv_write.
    std::vector<uint16_t> k1(pool_elems, 0), v1(pool_elems, 0);
    KvLayerView view1{k1.data(), v1.data(), pages, page_size, c.KH, c.hd};
    std::vector<float> qn, kn;
    testing::unfused_norm_rope(c, in, qn, kn);
    kv_write(kn.data(), in.v.data(), in.slots.data(), c.T, view1, ExecContext{});

    for (int nth : {1, 2, 3}) {
      std::vector<uint16_t> k2(pool_elems, 0), v2(pool_elems, 0);
      KvLayerView view2{k2.data(), v2.data(), pages, page_size, c.KH, c.hd};
      const auto qo = testing::run_fused_qk_norm_rope_kv_write(c, in, view2, nth);
      ASSERT_TRUE(bits_equal(qo, qn)) << "q, hd " << c.hd << " nth " << nth;
      ASSERT_EQ(k2, k1) << "k cache, hd " << c.hd;
      ASSERT_EQ(v2, v1) << "v cache, hd " << c.hd;
    }
  }
}

TEST_P(QkNormRopeKvWriteTest, PartialRotaryAndFactorsBitIdenticalToNormRopeKvWrite) {
  struct PCase {
    int T, H, KH, hd, n_rot;
    bool neox, norm, factors;
  };
  for (PCase c :
       {PCase{5, 3, 1, 32, 24, true, true, true}, PCase{4, 5, 5, 14, 6, false, true, true},
        PCase{7, 4, 2, 96, 72, true, false, true}, PCase{3, 2, 1, 30, 22, false, false, false},
        PCase{6, 3, 3, 64, 64, false, true, true}}) {
    const int page_size = 4;
    const int64_t pages = 16;
    auto q = random_floats(c.T * c.H * c.hd, c.T + c.hd);
    auto k = random_floats(c.T * c.KH * c.hd, c.T + c.hd + 1);
    auto v = random_floats(c.T * c.KH * c.hd, c.T + c.hd + 2);
    auto qw = random_floats(c.hd, 3, 0.5f, 1.5f), kw = random_floats(c.hd, 4, 0.5f, 1.5f);
    auto inv = rope_inv_freq(c.n_rot, 500000.0);
    auto ff = random_floats(c.n_rot / 2, 5, 1.0f, 8.0f);
    const RopeSpec spec{c.hd, c.n_rot, c.neox, inv.data(), c.factors ? ff.data() : nullptr};
    std::vector<int32_t> pos(c.T), slots(c.T);
    for (int t = 0; t < c.T; ++t) {
      pos[t] = 100 + 4099 * t;
      slots[t] = (t % 3 == 2) ? -1 : (t * 5) % (pages * page_size);
    }
    const size_t pool_elems = pages * page_size * c.KH * c.hd;
    std::vector<uint16_t> k1(pool_elems, 0), v1(pool_elems, 0);
    KvLayerView view1{k1.data(), v1.data(), pages, page_size, c.KH, c.hd};
    std::vector<float> qn = q, kn = k;
    ExecContext ctx;
    if (c.norm) {
      rms_norm(q.data(), qw.data(), qn.data(), int64_t(c.T) * c.H, c.hd, 1e-6f, ctx);
      rms_norm(k.data(), kw.data(), kn.data(), int64_t(c.T) * c.KH, c.hd, 1e-6f, ctx);
    }
    rope(qn.data(), pos.data(), spec, qn.data(), c.T, c.H, ctx);
    rope(kn.data(), pos.data(), spec, kn.data(), c.T, c.KH, ctx);
    kv_write(kn.data(), v.data(), slots.data(), c.T, view1, ctx);
    for (int nth : {1, 2}) {
      std::vector<uint16_t> k2(pool_elems, 0), v2(pool_elems, 0);
      KvLayerView view2{k2.data(), v2.data(), pages, page_size, c.KH, c.hd};
      std::vector<float> qo(q.size(), -5.0f);  // out of place: the tail must be written too
      run_group(nth, [&](const ExecContext& g) {
        qk_norm_rope_kv_write(q.data(), k.data(), v.data(), c.norm ? qw.data() : nullptr,
                              c.norm ? kw.data() : nullptr, 1e-6f, pos.data(), spec, slots.data(),
                              c.T, c.H, qo.data(), view2, g);
      });
      ASSERT_TRUE(bits_equal(qo, qn)) << "q, hd " << c.hd << " n_rot " << c.n_rot;
      ASSERT_EQ(k2, k1) << "k cache, hd " << c.hd << " n_rot " << c.n_rot;
      ASSERT_EQ(v2, v1) << "v cache, hd " << c.hd;
    }
  }
}

TEST_P(QkNormRopeKvWriteTest, BadArgumentsThrow) {
  std::vector<uint16_t> kc(64), vc(64);
  KvLayerView view{kc.data(), vc.data(), 2, 4, 1, 8};
  std::vector<float> q(8), k(8), w(8), inv(4);
  std::vector<int32_t> pos = {0}, slot = {8};
  EXPECT_THROW(
      qk_norm_rope_kv_write(q.data(), k.data(), k.data(), w.data(), w.data(), 1e-6f, pos.data(),
                            inv.data(), true, slot.data(), 1, 1, q.data(), view, ExecContext{}),
      Error);
  slot[0] = 0;
  const RopeSpec odd_rot{8, 5, true, inv.data(), nullptr};
  EXPECT_THROW(
      qk_norm_rope_kv_write(q.data(), k.data(), k.data(), w.data(), w.data(), 1e-6f, pos.data(),
                            odd_rot, slot.data(), 1, 1, q.data(), view, ExecContext{}),
      Error);
  const RopeSpec other_hd{16, 8, true, inv.data(), nullptr};
  EXPECT_THROW(
      qk_norm_rope_kv_write(q.data(), k.data(), k.data(), w.data(), w.data(), 1e-6f, pos.data(),
                            other_hd, slot.data(), 1, 1, q.data(), view, ExecContext{}),
      Error);
  EXPECT_THROW(
      qk_norm_rope_kv_write(q.data(), k.data(), k.data(), w.data(), nullptr, 1e-6f, pos.data(),
                            inv.data(), true, slot.data(), 1, 1, q.data(), view, ExecContext{}),
      Error);
}

KILN_INSTANTIATE_ISA_TESTS(QkNormRopeKvWriteTest);

}  // namespace
}  // namespace kiln::kernels
