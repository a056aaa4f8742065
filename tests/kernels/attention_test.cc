#include "kiln/kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

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

struct SeqSpec {
  int before;  // keys already cached
  int fresh;   // query rows this step (their keys are in the cache too, as after kv_write)
};

struct Case {
  int H = 4, KH = 1, hd = 256, page_size = 16, window = 0;
  float softcap = 0.0f;
  float q_range = 4.0f;  // q drawn from [-q_range, q_range]
  std::vector<SeqSpec> seqs;
  std::vector<int> inert_at;  // batch positions of inert (padding) rows
};

struct Batch {
  AttentionParams p;
  std::vector<uint16_t> kpool, vpool;
  KvLayerView view;
  std::vector<int32_t> block_table, seq_lens, positions, token_seq;
  std::vector<float> q;
  int64_t T = 0, S = 0;

  AttentionInputs inputs(float* out) const {
    AttentionInputs in;
    in.q = q.data();
    in.T = T;
    in.positions = positions.data();
    in.token_seq = token_seq.data();
    in.block_table = block_table.data();
    in.seq_lens = seq_lens.data();
    in.S = S;
    in.kv = view;
    in.out = out;
    return in;
  }
};

Batch build(const Case& c, uint32_t seed) {
  Batch b;
  b.S = static_cast<int64_t>(c.seqs.size());
  int max_pages = 1;
  int64_t total_pages = 0;
  for (auto s : c.seqs) {
    int pages = (s.before + s.fresh + c.page_size - 1) / c.page_size;
    max_pages = std::max(max_pages, pages + 1);
    total_pages += pages;
  }
  const int64_t n_pages = total_pages + 3;
  b.p.n_heads = c.H;
  b.p.n_kv_heads = c.KH;
  b.p.head_dim = c.hd;
  b.p.max_pages_per_seq = max_pages;
  b.p.window = c.window;
  b.p.scale = 1.0f / std::sqrt(static_cast<float>(c.hd));
  b.p.softcap = c.softcap;
  const int64_t slot_elems = static_cast<int64_t>(c.KH) * c.hd;
  auto kf = random_floats(n_pages * c.page_size * slot_elems, seed, -1.0f, 1.0f);
  auto vf = random_floats(kf.size(), seed + 1, -1.0f, 1.0f);
  b.kpool.resize(kf.size());
  b.vpool.resize(kf.size());
  for (size_t i = 0; i < kf.size(); ++i) {
    b.kpool[i] = f32_to_f16(kf[i]);
    b.vpool[i] = f32_to_f16(vf[i]);
  }
  b.view = {b.kpool.data(), b.vpool.data(), n_pages, c.page_size, c.KH, c.hd};
  // Pages handed out in a scrambled order, so the block table really is followed.
  std::vector<int32_t> perm(n_pages);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(seed));
  b.block_table.assign(b.S * max_pages, -1);
  int64_t next = 0;
  for (int64_t s = 0; s < b.S; ++s) {
    int len = c.seqs[s].before + c.seqs[s].fresh;
    b.seq_lens.push_back(len);
    for (int pg = 0; pg < (len + c.page_size - 1) / c.page_size; ++pg)
      b.block_table[s * max_pages + pg] = perm[next++];
  }
  for (int64_t s = 0; s < b.S; ++s)
    for (int i = 0; i < c.seqs[s].fresh; ++i) {
      b.positions.push_back(c.seqs[s].before + i);
      b.token_seq.push_back(static_cast<int32_t>(s));
    }
  for (int at : c.inert_at) {
    b.positions.insert(b.positions.begin() + at, 0);
    b.token_seq.insert(b.token_seq.begin() + at, -1);
  }
  b.T = static_cast<int64_t>(b.positions.size());
  // Larger q spreads the softmax (scores up to ~8 with the default range).
  b.q = random_floats(b.T * c.H * c.hd, seed + 2, -c.q_range, c.q_range);
  return b;
}

std::vector<float> run(const Batch& b, int nth, int64_t max_split = 8192) {
  AttentionLimits lim;
  lim.max_tokens = std::max<int64_t>(b.T, 1);
  lim.max_threads = nth;
  lim.max_split_partials = max_split;
  AttentionWork work(b.p, lim);
  std::vector<float> scratch(attention_scratch_bytes(b.p, lim) / sizeof(float) + 16);
  std::vector<float> out(b.T * b.p.n_heads * b.p.head_dim, 12345.0f);
  AttentionInputs in = b.inputs(out.data());
  attention_plan(b.p, in, nth, &work);
  run_group(nth,
            [&](const ExecContext& ctx) { attention_run(b.p, in, work, scratch.data(), ctx); });
  return out;
}

// Dense float64 attention over the keys each row may see.
std::vector<float> reference(const Batch& b) {
  const int H = b.p.n_heads, hd = b.p.head_dim, G = H / b.p.n_kv_heads, ps = b.view.page_size;
  std::vector<float> out(b.T * H * hd, 0.0f);
  for (int64_t t = 0; t < b.T; ++t) {
    int s = b.token_seq[t];
    if (s < 0) continue;
    int pos = b.positions[t];
    int lo = b.p.window > 0 ? std::max(0, pos - b.p.window + 1) : 0;
    for (int h = 0; h < H; ++h) {
      int kvh = h / G;
      const float* q = b.q.data() + (t * H + h) * hd;
      std::vector<double> sc;
      std::vector<int64_t> base;
      for (int j = lo; j <= pos; ++j) {
        int64_t slot = int64_t(b.block_table[s * b.p.max_pages_per_seq + j / ps]) * ps + j % ps;
        int64_t off = (slot * b.p.n_kv_heads + kvh) * hd;
        double d = 0;
        for (int x = 0; x < hd; ++x) d += double(q[x]) * f16_to_f32(b.kpool[off + x]);
        d *= b.p.scale;
        if (b.p.softcap > 0) d = b.p.softcap * std::tanh(d / b.p.softcap);
        sc.push_back(d);
        base.push_back(off);
      }
      double m = *std::max_element(sc.begin(), sc.end()), sum = 0;
      for (auto& v : sc) sum += v = std::exp(v - m);
      for (int x = 0; x < hd; ++x) {
        double acc = 0;
        for (size_t j = 0; j < sc.size(); ++j) acc += sc[j] * f16_to_f32(b.vpool[base[j] + x]);
        out[(t * H + h) * hd + x] = float(acc / sum);
      }
    }
  }
  return out;
}

// The same row computed alone: a batch of one row of one sequence.
std::vector<float> run_row_alone(const Batch& b, int64_t t) {
  Batch one = b;
  int s = b.token_seq[t];
  const int64_t row = int64_t(b.p.n_heads) * b.p.head_dim;
  one.q.assign(b.q.begin() + t * row, b.q.begin() + (t + 1) * row);
  one.positions = {b.positions[t]};
  one.token_seq = {0};
  one.block_table.assign(b.block_table.begin() + s * b.p.max_pages_per_seq,
                         b.block_table.begin() + (s + 1) * b.p.max_pages_per_seq);
  one.seq_lens = {b.seq_lens[s]};
  one.T = 1;
  one.S = 1;
  one.view = {one.kpool.data(), one.vpool.data(),  b.view.n_pages,
              b.view.page_size, b.view.n_kv_heads, b.view.head_dim};
  return run(one, 1);
}

std::vector<float> row_of(const std::vector<float>& out, const Batch& b, int64_t t) {
  const int64_t row = int64_t(b.p.n_heads) * b.p.head_dim;
  return std::vector<float>(out.begin() + t * row, out.begin() + (t + 1) * row);
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

KILN_INSTANTIATE_ISA_TESTS(AttentionTest);

}  // namespace
}  // namespace kiln::kernels
