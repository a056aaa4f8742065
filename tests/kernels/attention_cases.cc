#include "attention_cases.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "kernel_test_util.h"

namespace kiln::kernels::testing {

AttentionInputs AttentionBatch::inputs(float* out, const KvLayerView& view) const {
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
  in.sinks = sinks.empty() ? nullptr : sinks.data();
  return in;
}

AttentionBatch AttentionBatch::row_alone(int64_t t) const {
  AttentionBatch one;
  one.p = p;
  one.n_pages = n_pages;
  const int s = token_seq[t];
  const int64_t row = int64_t(p.n_heads) * p.head_dim;
  one.q.assign(q.begin() + t * row, q.begin() + (t + 1) * row);
  one.sinks = sinks;
  one.positions = {positions[t]};
  one.token_seq = {0};
  one.block_table.assign(block_table.begin() + s * p.max_pages_per_seq,
                         block_table.begin() + (s + 1) * p.max_pages_per_seq);
  one.seq_lens = {seq_lens[s]};
  one.T = 1;
  one.S = 1;
  return one;
}

std::vector<float> AttentionBatch::row_of(const std::vector<float>& out, int64_t t) const {
  const int64_t row = int64_t(p.n_heads) * p.head_dim;
  return std::vector<float>(out.begin() + t * row, out.begin() + (t + 1) * row);
}

AttentionBatch layout_attention_batch(const AttentionCase& c, uint32_t seed) {
  AttentionBatch b;
  b.S = static_cast<int64_t>(c.seqs.size());
  int max_pages = 1;
  int64_t total_pages = 0;
  for (auto s : c.seqs) {
    int pages = (s.before + s.fresh + c.page_size - 1) / c.page_size;
    max_pages = std::max(max_pages, pages + 1);
    total_pages += pages;
  }
  b.n_pages = total_pages + 3;
  b.p.n_heads = c.H;
  b.p.n_kv_heads = c.KH;
  b.p.head_dim = c.hd;
  b.p.max_pages_per_seq = max_pages;
  b.p.window = c.window;
  b.p.scale = 1.0f / std::sqrt(static_cast<float>(c.hd));
  b.p.softcap = c.softcap;
  std::vector<int32_t> perm(b.n_pages);
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
  if (c.sink_range > 0) b.sinks = random_floats(c.H, seed + 3, -c.sink_range, c.sink_range);
  return b;
}

std::vector<float> run_attention(const AttentionBatch& b, const KvLayerView& view, int nth,
                                 int64_t max_split) {
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

std::vector<float> reference_attention(const AttentionBatch& b, int page_size, const KvElement& key,
                                       const KvElement& value) {
  const int H = b.p.n_heads, hd = b.p.head_dim, G = H / b.p.n_kv_heads, ps = page_size;
  std::vector<float> out(b.T * H * hd, 0.0f);
  for (int64_t t = 0; t < b.T; ++t) {
    const int s = b.token_seq[t];
    if (s < 0) continue;
    const int pos = b.positions[t];
    const int lo = b.p.window > 0 ? std::max(0, pos - b.p.window + 1) : 0;
    for (int h = 0; h < H; ++h) {
      const float* q = b.q.data() + (t * H + h) * hd;
      std::vector<double> sc;
      std::vector<int64_t> base;
      for (int j = lo; j <= pos; ++j) {
        int64_t slot = int64_t(b.block_table[s * b.p.max_pages_per_seq + j / ps]) * ps + j % ps;
        int64_t off = (slot * b.p.n_kv_heads + h / G) * hd;
        double d = 0;
        for (int x = 0; x < hd; ++x) d += double(q[x]) * key(off + x);
        d *= b.p.scale;
        if (b.p.softcap > 0) d = b.p.softcap * std::tanh(d / b.p.softcap);
        sc.push_back(d);
        base.push_back(off);
      }
      double m = *std::max_element(sc.begin(), sc.end()), sum = 0;
      for (auto& v : sc) sum += v = std::exp(v - m);
      // A sink is one more logit in the denominator, with no value.
      if (!b.sinks.empty()) sum += std::exp(double(b.sinks[h]) - m);
      for (int x = 0; x < hd; ++x) {
        double acc = 0;
        for (size_t j = 0; j < sc.size(); ++j) acc += sc[j] * value(base[j] + x);
        out[(t * H + h) * hd + x] = float(acc / sum);
      }
    }
  }
  return out;
}

}  // namespace kiln::kernels::testing
