// Attention over a q8 KV cache: against a float64 reference on the dequantized values, against
// the scalar instance, against f16 attention on the same (dequantized) values, and batch and
// thread-count invariance (bit for bit), for prefill, decode with split-K, GQA, windows and the
// softcap.
#include <memory>

#include "attention_cases.h"
#include "kernel_test_util.h"
#include "kiln/base/error.h"
#include "kiln/base/half.h"
#include "kiln/kernels/attention.h"
#include "kv_q8_pool.h"

namespace kiln::kernels {
namespace {

using testing::all_close;
using testing::bits_equal;
using testing::random_floats;
using testing::run_group;

// Float arithmetic against float64 over the same (dequantized) values, as attention_test.cc,
// scaled for keys and values up to 4x larger here (blocks of different magnitudes): far below
// the q8 quantization error itself (~1e-2), so a wrongly scaled block still fails.
constexpr double kRel = 4e-5;
constexpr double kAbs = 1e-5;

using SeqSpec = testing::SeqSpec;
using Case = testing::AttentionCase;

// A batch over a q8 pool whose blocks have different magnitudes, so the per-block scales
// really differ.
struct Batch : testing::AttentionBatch {
  std::unique_ptr<testing::Q8Pool> pool;
  std::vector<float> deq_k, deq_v;  // the pool's values, dequantized: [slot][kv_head][hd]

  AttentionInputs inputs(float* out, const KvLayerView& view) const {
    return AttentionBatch::inputs(out, view);
  }
};

Batch build(const Case& c, uint32_t seed) {
  Batch b;
  static_cast<testing::AttentionBatch&>(b) = testing::layout_attention_batch(c, seed);
  b.pool = std::make_unique<testing::Q8Pool>(b.n_pages, c.page_size, c.KH, c.hd);
  testing::Q8Pool& pool = *b.pool;
  auto kf = random_floats(pool.k8.size(), seed, -1.0f, 1.0f);
  auto vf = random_floats(kf.size(), seed + 1, -1.0f, 1.0f);
  const auto mag = random_floats(pool.ks.size() * 2, seed + 3, 0.1f, 4.0f);
  b.deq_k.resize(kf.size());
  b.deq_v.resize(kf.size());
  for (size_t blk = 0; blk < pool.ks.size(); ++blk) {
    const size_t o = blk * size_t(c.hd);
    for (int x = 0; x < c.hd; ++x) {
      kf[o + x] *= mag[2 * blk];
      vf[o + x] *= mag[2 * blk + 1];
    }
    pool.ks[blk] = quantize_q8_block_ref(kf.data() + o, pool.k8.data() + o, c.hd);
    pool.vs[blk] = quantize_q8_block_ref(vf.data() + o, pool.v8.data() + o, c.hd);
    for (int x = 0; x < c.hd; ++x) {
      b.deq_k[o + x] = float(pool.k8[o + x]) * pool.ks[blk];
      b.deq_v[o + x] = float(pool.v8[o + x]) * pool.vs[blk];
    }
  }
  return b;
}

std::vector<float> run_view(const Batch& b, const KvLayerView& view, int nth,
                            int64_t max_split = 8192) {
  return testing::run_attention(b, view, nth, max_split);
}

std::vector<float> run(const Batch& b, int nth, int64_t max_split = 8192) {
  return run_view(b, b.pool->view, nth, max_split);
}

// Dense float64 attention over the dequantized keys and values each row may see.
std::vector<float> reference(const Batch& b) {
  return testing::reference_attention(
      b, b.pool->view.page_size, [&](int64_t i) { return b.deq_k[i]; },
      [&](int64_t i) { return b.deq_v[i]; });
}

// Row t computed alone: one row of one sequence, over the same pool.
std::vector<float> run_row_alone(const Batch& b, int64_t t) {
  return testing::run_attention(b.row_alone(t), b.pool->view, 1);
}

std::vector<float> row_of(const std::vector<float>& out, const Batch& b, int64_t t) {
  return b.row_of(out, t);
}

class AttentionQ8Test : public testing::IsaTest {
 protected:
  void check(const Case& c, uint32_t seed, const std::vector<int64_t>& alone_rows) {
    Batch b = build(c, seed);
    const auto out1 = run(b, 1);
    ASSERT_TRUE(all_close(out1, reference(b), kRel, kAbs));
    // The scalar instance is the reference implementation of the same kernel.
    std::vector<float> scalar;
    testing::with_isa(Isa::Scalar, [&] { scalar = run(b, 1); });
    set_isa_cap(GetParam());
    ASSERT_TRUE(all_close(out1, scalar, kRel, kAbs)) << "vs the scalar instance";
    // Thread counts, split-K or not, and the rows alone: the same bits.
    for (int nth : {2, 3}) ASSERT_TRUE(bits_equal(run(b, nth), out1)) << nth << " threads";
    ASSERT_TRUE(bits_equal(run(b, 3, 0), out1)) << "without split";
    for (int64_t t : alone_rows)
      ASSERT_TRUE(bits_equal(run_row_alone(b, t), row_of(out1, b, t))) << "row " << t;
    // f16 attention over the dequantized values (rounded to f16) agrees to f16 precision:
    // values up to 4 round by up to 2e-3, and scores up to ~10 by up to ~5e-3 before the exp.
    std::vector<uint16_t> k16(b.deq_k.size()), v16(b.deq_v.size());
    for (size_t i = 0; i < k16.size(); ++i) {
      k16[i] = f32_to_f16(b.deq_k[i]);
      v16[i] = f32_to_f16(b.deq_v[i]);
    }
    const KvLayerView& q8 = b.pool->view;
    KvLayerView f16{k16.data(), v16.data(), q8.n_pages, q8.page_size, q8.n_kv_heads, q8.head_dim};
    ASSERT_TRUE(all_close(run_view(b, f16, 2), out1, 1e-2, 1e-2)) << "vs f16 attention";
  }
};

TEST_P(AttentionQ8Test, DecodeVeryDifferentLengthsSplitK) {
  Case c;  // Gemma 3 270M: 4 heads, 1 KV head, head_dim 256
  c.seqs = {{0, 1}, {16, 1}, {299, 1}, {2999, 1}, {511, 1}};
  check(c, 1, {0, 1, 2, 3, 4});
}

TEST_P(AttentionQ8Test, PrefillOneSequence) {
  Case c;
  c.seqs = {{0, 300}};
  check(c, 2, {0, 7, 8, 255, 256, 299});
}

TEST_P(AttentionQ8Test, ChunkedPrefillMixedWithDecodeGqa) {
  Case c;
  c.H = 8;
  c.KH = 2;
  c.hd = 64;
  c.seqs = {{0, 37}, {300, 5}, {1000, 1}, {2, 70}, {255, 3}};
  check(c, 3, {0, 36, 37, 41, 42, 43, 100, 114});
}

// gpt-oss's sinks over a q8 cache: GQA decode split across threads, a windowed prefill.
TEST_P(AttentionQ8Test, Sinks) {
  Case c;
  c.KH = 2;
  c.H = 8;
  c.hd = 64;
  c.sink_range = 6.0f;
  c.seqs = {{0, 1}, {249, 1}, {2000, 1}, {41, 11}};
  check(c, 40, {0, 1, 2, 3, 10});
  c.window = 100;
  c.seqs = {{0, 150}};
  check(c, 41, {0, 99, 100, 149});
}

TEST_P(AttentionQ8Test, GroupsHeadDimsWindowsAndSoftcap) {
  int seed = 10;
  for (int G : {1, 3, 8})
    for (int hd : {14, 48, 128}) {
      Case c;
      c.KH = 2;
      c.H = 2 * G;
      c.hd = hd;
      c.page_size = hd == 48 ? 1 : 16;
      c.window = hd == 128 ? 100 : 0;
      c.softcap = G == 3 ? 5.0f : 0.0f;
      c.seqs = {{0, 1}, {4, 1}, {249, 1}, {700, 1}, {41, 11}};
      check(c, ++seed, {0, 1, 2, 3, 4, 10});
    }
}

TEST_P(AttentionQ8Test, Q8ViewWithoutScalesThrowsAtPlan) {
  Case c;
  c.seqs = {{10, 2}};
  Batch b = build(c, 9);
  AttentionLimits lim;
  lim.max_tokens = 4;
  AttentionWork work(b.p, lim);
  std::vector<float> out(b.T * 4 * 256);
  KvLayerView bad = b.pool->view;
  bad.k_scale = nullptr;  // a q8 view without its scales
  EXPECT_THROW(attention_plan(b.p, b.inputs(out.data(), bad), 1, &work), Error);
}

KILN_INSTANTIATE_ISA_TESTS(AttentionQ8Test);

}  // namespace
}  // namespace kiln::kernels
