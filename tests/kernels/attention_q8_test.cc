// Attention over a q8 KV cache: against a float64 reference on the dequantized values, against
// the scalar instance, against f16 attention on the same (dequantized) values, and batch and
// thread-count invariance (bit for bit), for prefill, decode with split-K, GQA, windows and the
// softcap.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

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

struct SeqSpec {
  int before;  // keys already cached
  int fresh;   // query rows this step
};

struct Case {
  int H = 4, KH = 1, hd = 256, page_size = 16, window = 0;
  float softcap = 0.0f;
  std::vector<SeqSpec> seqs;
};

struct Batch {
  AttentionParams p;
  std::unique_ptr<testing::Q8Pool> pool;
  std::vector<float> deq_k, deq_v;  // the pool's values, dequantized: [slot][kv_head][hd]
  std::vector<int32_t> block_table, seq_lens, positions, token_seq;
  std::vector<float> q;
  int64_t T = 0, S = 0;

  AttentionInputs inputs(float* out, const KvLayerView& view) const {
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
  b.pool = std::make_unique<testing::Q8Pool>(n_pages, c.page_size, c.KH, c.hd);
  testing::Q8Pool& pool = *b.pool;
  // Blocks of different magnitudes, so the per-block scales really differ.
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
  b.T = static_cast<int64_t>(b.positions.size());
  b.q = random_floats(b.T * c.H * c.hd, seed + 2, -4.0f, 4.0f);
  return b;
}

std::vector<float> run_view(const Batch& b, const KvLayerView& view, int nth,
                            int64_t max_split = 8192) {
  AttentionLimits lim;
  lim.max_tokens = std::max<int64_t>(b.T, 1);
  lim.max_threads = nth;
  lim.max_split_partials = max_split;
  AttentionWork work(b.p, lim);
  std::vector<float> scratch(attention_scratch_bytes(b.p, lim) / sizeof(float) + 16);
  std::vector<float> out(b.T * b.p.n_heads * b.p.head_dim, 12345.0f);
  AttentionInputs in = b.inputs(out.data(), view);
  attention_plan(b.p, in, nth, &work);
  run_group(nth,
            [&](const ExecContext& ctx) { attention_run(b.p, in, work, scratch.data(), ctx); });
  return out;
}

std::vector<float> run(const Batch& b, int nth, int64_t max_split = 8192) {
  return run_view(b, b.pool->view, nth, max_split);
}

// Dense float64 attention over the dequantized keys and values each row may see.
std::vector<float> reference(const Batch& b) {
  const int H = b.p.n_heads, hd = b.p.head_dim, G = H / b.p.n_kv_heads;
  const int ps = b.pool->view.page_size;
  std::vector<float> out(b.T * H * hd, 0.0f);
  for (int64_t t = 0; t < b.T; ++t) {
    const int s = b.token_seq[t], pos = b.positions[t];
    const int lo = b.p.window > 0 ? std::max(0, pos - b.p.window + 1) : 0;
    for (int h = 0; h < H; ++h) {
      const float* q = b.q.data() + (t * H + h) * hd;
      std::vector<double> sc;
      std::vector<int64_t> base;
      for (int j = lo; j <= pos; ++j) {
        int64_t slot = int64_t(b.block_table[s * b.p.max_pages_per_seq + j / ps]) * ps + j % ps;
        int64_t off = (slot * b.p.n_kv_heads + h / G) * hd;
        double d = 0;
        for (int x = 0; x < hd; ++x) d += double(q[x]) * b.deq_k[off + x];
        d *= b.p.scale;
        if (b.p.softcap > 0) d = b.p.softcap * std::tanh(d / b.p.softcap);
        sc.push_back(d);
        base.push_back(off);
      }
      double m = *std::max_element(sc.begin(), sc.end()), sum = 0;
      for (auto& v : sc) sum += v = std::exp(v - m);
      for (int x = 0; x < hd; ++x) {
        double acc = 0;
        for (size_t j = 0; j < sc.size(); ++j) acc += sc[j] * b.deq_v[base[j] + x];
        out[(t * H + h) * hd + x] = float(acc / sum);
      }
    }
  }
  return out;
}

// Row t computed alone: one row of one sequence, over the same pool.
std::vector<float> run_row_alone(const Batch& b, int64_t t) {
  Batch one;
  one.p = b.p;
  const int s = b.token_seq[t];
  const int64_t row = int64_t(b.p.n_heads) * b.p.head_dim;
  one.q.assign(b.q.begin() + t * row, b.q.begin() + (t + 1) * row);
  one.positions = {b.positions[t]};
  one.token_seq = {0};
  one.block_table.assign(b.block_table.begin() + s * b.p.max_pages_per_seq,
                         b.block_table.begin() + (s + 1) * b.p.max_pages_per_seq);
  one.seq_lens = {b.seq_lens[s]};
  one.T = 1;
  one.S = 1;
  return run_view(one, b.pool->view, 1);
}

std::vector<float> row_of(const std::vector<float>& out, const Batch& b, int64_t t) {
  const int64_t row = int64_t(b.p.n_heads) * b.p.head_dim;
  return std::vector<float>(out.begin() + t * row, out.begin() + (t + 1) * row);
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
