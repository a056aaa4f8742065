#include "kiln/kernels/attention.h"

#include "attention_cases.h"
#include "kernel_test_util.h"
#include "kiln/base/error.h"
#include "kiln/base/half.h"

namespace kiln::kernels {
namespace {

using testing::all_close;
using testing::bits_equal;
using testing::random_floats;
using testing::run_group;

// Tolerance vs the float64 dense reference: float dot products over head_dim, a float
// softmax with vector exp, float accumulation over up to thousands of keys. Outputs are
// averages of values in [-1, 1].
constexpr double kRel = 1e-5;
constexpr double kAbs = 2e-6;

using SeqSpec = testing::SeqSpec;
using Case = testing::AttentionCase;

// A batch over an f16 pool of random keys and values.
struct Batch : testing::AttentionBatch {
  std::vector<uint16_t> kpool, vpool;
  KvLayerView view;

  AttentionInputs inputs(float* out) const { return AttentionBatch::inputs(out, view); }
};

Batch build(const Case& c, uint32_t seed) {
  Batch b;
  static_cast<testing::AttentionBatch&>(b) = testing::layout_attention_batch(c, seed);
  const int64_t slot_elems = static_cast<int64_t>(c.KH) * c.hd;
  auto kf = random_floats(b.n_pages * c.page_size * slot_elems, seed, -1.0f, 1.0f);
  auto vf = random_floats(kf.size(), seed + 1, -1.0f, 1.0f);
  b.kpool.resize(kf.size());
  b.vpool.resize(kf.size());
  for (size_t i = 0; i < kf.size(); ++i) {
    b.kpool[i] = f32_to_f16(kf[i]);
    b.vpool[i] = f32_to_f16(vf[i]);
  }
  b.view = {b.kpool.data(), b.vpool.data(), b.n_pages, c.page_size, c.KH, c.hd};
  return b;
}

std::vector<float> run(const Batch& b, int nth, int64_t max_split = 8192) {
  return testing::run_attention(b, b.view, nth, max_split);
}

std::vector<float> reference(const Batch& b) {
  return testing::reference_attention(
      b, b.view.page_size, [&](int64_t i) { return f16_to_f32(b.kpool[i]); },
      [&](int64_t i) { return f16_to_f32(b.vpool[i]); });
}

// The same row computed alone: a batch of one row of one sequence, over the same pool.
std::vector<float> run_row_alone(const Batch& b, int64_t t) {
  return testing::run_attention(b.row_alone(t), b.view, 1);
}

std::vector<float> row_of(const std::vector<float>& out, const Batch& b, int64_t t) {
  return b.row_of(out, t);
}

class AttentionTest : public testing::IsaTest {
 protected:
  // Checks against the reference, thread-count invariance, and rows alone vs in the batch.
  void check(const Case& c, uint32_t seed, std::vector<int64_t> alone_rows = {}) {
    Batch b = build(c, seed);
    auto out1 = run(b, 1);
    ASSERT_TRUE(all_close(out1, reference(b), kRel, kAbs));
    for (int nth : {2, 3}) ASSERT_TRUE(bits_equal(run(b, nth), out1)) << nth << " threads";
    // No split-K at all (no partial capacity) must not change a bit either.
    ASSERT_TRUE(bits_equal(run(b, 3, 0), out1)) << "without split";
    for (int64_t t : alone_rows)
      ASSERT_TRUE(bits_equal(run_row_alone(b, t), row_of(out1, b, t))) << "row " << t;
  }
};

TEST_P(AttentionTest, DecodeGemmaShapesVeryDifferentLengths) {
  Case c;  // Gemma 3 270M: 4 heads, 1 KV head, head_dim 256
  c.seqs = {{0, 1}, {16, 1}, {299, 1}, {2999, 1}, {511, 1}};
  check(c, 1, {0, 1, 2, 3, 4});
}

TEST_P(AttentionTest, PrefillOneSequence) {
  Case c;
  c.seqs = {{0, 300}};
  check(c, 2, {0, 7, 8, 255, 256, 299});
}

TEST_P(AttentionTest, ChunkedPrefillMixedWithDecode) {
  Case c;
  c.H = 8;
  c.KH = 2;
  c.hd = 64;
  c.seqs = {{0, 37}, {300, 5}, {1000, 1}, {2, 70}, {255, 3}};
  check(c, 3, {0, 36, 37, 41, 42, 43, 100, 114});
}

TEST_P(AttentionTest, SlidingWindow) {
  for (int window : {1, 100, 512}) {
    Case c;
    c.window = window;
    c.seqs = {{2999, 1}, {700, 20}, {0, 40}, {5, 1}};
    check(c, 4 + window, {0, 1, 20, 21, 60});
  }
}

TEST_P(AttentionTest, PageSizes) {
  for (int ps : {1, 16, 64}) {
    Case c;
    c.page_size = ps;
    c.H = 2;
    c.KH = 2;
    c.hd = 128;
    c.seqs = {{0, 9}, {130, 2}, {600, 1}};
    check(c, 10 + ps, {0, 9, 11});
  }
}

TEST_P(AttentionTest, InertRowsAreZeroAndChangeNothing) {
  Case c;
  c.seqs = {{10, 3}, {500, 1}};
  c.inert_at = {0, 2, 6};
  Batch b = build(c, 5);
  auto out = run(b, 2);
  ASSERT_TRUE(all_close(out, reference(b), kRel, kAbs));
  for (int64_t t : {0, 2, 6})
    for (float v : row_of(out, b, t)) ASSERT_EQ(v, 0.0f);
  Case plain = c;
  plain.inert_at = {};
  Batch bp = build(plain, 5);
  // Same rows, without padding: bit-identical (the q data differ in layout, so compare alone).
  for (int64_t t : {1, 3, 4, 5}) ASSERT_TRUE(bits_equal(run_row_alone(b, t), row_of(out, b, t)));
  (void)bp;
}

TEST_P(AttentionTest, OddHeadDimsAndGroups) {
  for (int hd : {2, 14, 16, 48}) {
    Case c;
    c.hd = hd;
    c.H = 6;
    c.KH = 3;
    c.seqs = {{0, 11}, {270, 1}};
    check(c, 20 + hd, {5, 11});
  }
}

// Every register-blocking shape of the QK and P*V kernels: GQA groups of 1..12 queries (the
// kernels take up to 8 at a time, reading K/V straight from the f16 pool, and switch to a
// converted f32 block above that), head_dims that leave remainder vectors, key counts that
// are not multiples of the 16-key block, and sliding windows that shift block alignment
// between a tile and a row alone. Each row must match the reference and be bit-identical
// alone.
TEST_P(AttentionTest, GroupSizesHeadDimsAndRaggedKeyCounts) {
  for (int G : {1, 3, 5, 7, 8, 12})
    for (int hd : {48, 80}) {
      Case c;
      c.H = 2 * G;
      c.KH = 2;
      c.hd = hd;
      c.window = G == 5 ? 37 : 0;
      c.seqs = {{0, 1}, {4, 1}, {16, 1}, {32, 1}, {249, 1}, {256, 1}, {41, 11}};
      check(c, 100 + G * 7 + hd, {0, 1, 2, 3, 4, 5, 6, 10, 16});
    }
}

TEST_P(AttentionTest, ReplanAndRerunIsStable) {
  Case c;
  c.seqs = {{1000, 1}, {30, 4}};
  Batch b = build(c, 6);
  AttentionLimits lim;
  lim.max_tokens = 16;
  lim.max_threads = 2;
  AttentionWork work(b.p, lim);
  std::vector<float> scratch(attention_scratch_bytes(b.p, lim) / sizeof(float));
  std::vector<float> o1(b.T * 4 * 256), o2(o1.size());
  AttentionInputs in1 = b.inputs(o1.data()), in2 = b.inputs(o2.data());
  attention_plan(b.p, in1, 2, &work);
  run_group(2, [&](const ExecContext& ctx) { attention_run(b.p, in1, work, scratch.data(), ctx); });
  // The same plan runs again (graph replay without new host values).
  run_group(2, [&](const ExecContext& ctx) { attention_run(b.p, in2, work, scratch.data(), ctx); });
  EXPECT_TRUE(bits_equal(o1, o2));
  EXPECT_TRUE(all_close(o1, reference(b), kRel, kAbs));
}

// One short decode row has one item (one chunk, one KV head): its GQA group is split so the
// second thread works too, with the same bits as one thread.
TEST_P(AttentionTest, ShortSingleRowSplitsItsQueryHeads) {
  Case c;
  c.seqs = {{100, 1}};
  Batch b = build(c, 8);
  AttentionLimits lim;
  lim.max_tokens = 1;
  lim.max_threads = 2;
  AttentionWork work(b.p, lim);
  std::vector<float> out(4 * 256);
  attention_plan(b.p, b.inputs(out.data()), 2, &work);
  EXPECT_EQ(work.n_items(), 2);
  attention_plan(b.p, b.inputs(out.data()), 1, &work);
  EXPECT_EQ(work.n_items(), 1);  // nothing to gain on one thread
  check(c, 8);
}

TEST_P(AttentionTest, LongDecodeIsSplitAcrossThreads) {
  Case c;
  c.seqs = {{4095, 1}};
  Batch b = build(c, 7);
  AttentionLimits lim;
  lim.max_tokens = 1;
  lim.max_threads = 4;
  AttentionWork work(b.p, lim);
  std::vector<float> out(4 * 256);
  attention_plan(b.p, b.inputs(out.data()), 4, &work);
  EXPECT_GT(work.n_items(), 4);  // 16 chunks of one row spread over 4 threads
  EXPECT_EQ(work.n_split_tiles(), 1);
  attention_plan(b.p, b.inputs(out.data()), 1, &work);
  EXPECT_EQ(work.n_items(), 1);
}

TEST_P(AttentionTest, BadInputsThrowAtPlan) {
  Case c;
  c.seqs = {{10, 2}};
  Batch b = build(c, 8);
  AttentionLimits lim;
  lim.max_tokens = 4;
  lim.max_threads = 1;
  AttentionWork work(b.p, lim);
  std::vector<float> out(b.T * 4 * 256);
  {
    Batch x = b;
    x.positions[1] = 12;  // beyond seq_len
    EXPECT_THROW(attention_plan(x.p, x.inputs(out.data()), 1, &work), Error);
  }
  {
    Batch x = b;
    x.token_seq[0] = 3;  // no such sequence
    EXPECT_THROW(attention_plan(x.p, x.inputs(out.data()), 1, &work), Error);
  }
  {
    Batch x = b;
    x.block_table[0] = int32_t(x.view.n_pages);  // page outside the pool
    EXPECT_THROW(attention_plan(x.p, x.inputs(out.data()), 1, &work), Error);
  }
  EXPECT_THROW(attention_plan(b.p, b.inputs(out.data()), 2, &work), Error);  // nth > limit
  AttentionParams bad = b.p;
  bad.n_kv_heads = 3;
  EXPECT_THROW(AttentionWork(bad, lim), Error);
  AttentionWork ok(b.p, lim);
  attention_plan(b.p, b.inputs(out.data()), 1, &ok);
  std::vector<float> scratch(attention_scratch_bytes(b.p, lim) / sizeof(float));
  Batch y = b;
  y.T = 1;  // not what was planned
  EXPECT_THROW(attention_run(y.p, y.inputs(out.data()), ok, scratch.data(), ExecContext{}), Error);
}

// Gemma 2's attention-logit softcap: cap 5 against scores up to ~+-20 (q in [-16, 16]) is
// well into tanh's flat part, so an uncapped kernel would fail the reference by far. Decode
// (GQA, long split-K rows), prefill, chunked prefill with a window, and the head_dims that
// take the scalar path (14) or leave remainder lanes (48, 80).
TEST_P(AttentionTest, SoftcapDecodeAndPrefill) {
  Case decode;
  decode.softcap = 5.0f;
  decode.q_range = 16.0f;
  decode.seqs = {{0, 1}, {16, 1}, {299, 1}, {2999, 1}};
  check(decode, 200, {0, 1, 2, 3});
  Case prefill = decode;
  prefill.seqs = {{0, 300}};
  check(prefill, 201, {0, 7, 8, 255, 256, 299});
  for (int hd : {14, 48, 80}) {
    Case mixed = decode;
    mixed.H = 8;
    mixed.KH = 2;
    mixed.hd = hd;
    mixed.window = hd == 48 ? 37 : 0;
    mixed.seqs = {{0, 37}, {300, 5}, {1000, 1}, {255, 3}};
    check(mixed, 202 + hd, {0, 36, 37, 41, 42, 45});
  }
}

// The cap matters: the same batch without it is far from the capped reference, and a huge
// cap (tanh's linear part) gives nearly the uncapped result.
TEST_P(AttentionTest, SoftcapChangesLargeScoresOnly) {
  Case c;
  c.softcap = 5.0f;
  c.q_range = 16.0f;
  c.seqs = {{100, 1}, {20, 3}};
  Batch b = build(c, 210);
  const auto capped = run(b, 2);
  ASSERT_TRUE(all_close(capped, reference(b), kRel, kAbs));
  Batch plain = b;
  plain.p.softcap = 0.0f;
  EXPECT_FALSE(all_close(run(plain, 2), capped, 1e-2, 1e-3));
  Batch loose = b;
  loose.p.softcap = 1e6f;
  EXPECT_TRUE(all_close(run(loose, 2), run(plain, 2), 1e-4, 1e-5));
  AttentionParams bad = b.p;
  bad.softcap = -1.0f;
  AttentionLimits lim;
  lim.max_tokens = 4;
  EXPECT_THROW(AttentionWork(bad, lim), Error);
}

// gpt-oss's attention sinks: per-head logits in [-6, 6] against scores up to ~+-8, so some heads'
// sinks dominate their rows and others barely count. Decode rows long enough to be split across
// threads (the sink is folded after the merge), prefill, sliding windows, GQA groups, and the
// head_dims of the scalar path and remainder lanes.
TEST_P(AttentionTest, SinksDecodeAndPrefill) {
  Case decode;
  decode.H = 8;
  decode.KH = 2;
  decode.sink_range = 6.0f;
  decode.seqs = {{0, 1}, {16, 1}, {299, 1}, {2999, 1}};
  check(decode, 220, {0, 1, 2, 3});
  Case prefill = decode;
  prefill.seqs = {{0, 300}};
  prefill.window = 128;
  check(prefill, 221, {0, 7, 8, 127, 128, 299});
  for (int hd : {14, 64}) {
    Case mixed = decode;
    mixed.hd = hd;
    mixed.window = hd == 64 ? 37 : 0;
    mixed.seqs = {{0, 37}, {300, 5}, {1000, 1}, {255, 3}};
    check(mixed, 222 + hd, {0, 36, 37, 41, 42, 45});
  }
}

// The sinks matter: without them the same batch is far from the reference with them, and
// sinks far below every score change nothing measurable.
TEST_P(AttentionTest, SinksTakeWeightFromTheKeys) {
  Case c;
  c.sink_range = 6.0f;
  c.seqs = {{100, 1}, {20, 3}};
  Batch b = build(c, 230);
  const auto with = run(b, 2);
  ASSERT_TRUE(all_close(with, reference(b), kRel, kAbs));
  Batch plain = b;
  plain.sinks.clear();
  EXPECT_FALSE(all_close(run(plain, 2), with, 1e-2, 1e-3));
  Batch faint = b;
  faint.sinks.assign(faint.sinks.size(), -100.0f);
  EXPECT_TRUE(bits_equal(run(faint, 2), run(plain, 2)));
}

KILN_INSTANTIATE_ISA_TESTS(AttentionTest);

}  // namespace
}  // namespace kiln::kernels
