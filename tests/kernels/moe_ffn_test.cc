// The mixture-of-experts FFN kernel against a plain double-precision statement of it (softmax,
// top-k with ties to the lowest expert, renormalization, expert FFNs on dequantized weights),
// and its batch and thread invariance.
#include "kiln/kernels/moe_ffn.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/kernel_test_util.h"
#include "kernels/matmul_test_util.h"

namespace kiln::kernels {
namespace {

using testing::bits_equal;
using testing::run_threads;

bool is_float(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

// One layer's weights in GGUF layout: router [E,D], gate/up [E,F,D], down [E,D,F].
struct Layer {
  int64_t E, D, F;
  int top_k;
  bool norm;
  DType router_t, expert_t;
  std::vector<uint8_t> router, gate, up, down;
  // gpt-oss (make_gpt_oss): biases, top-k by logit then softmax over those k, clamped SwiGLU.
  bool gpt_oss = false;
  float alpha = 1.702f, limit = 0.0f;
  std::vector<float> router_b, gate_b, up_b, down_b;

  // gate/up weights scaled by `gain` so that the clamps at `lim` bite.
  void make_gpt_oss(float lim, float gain, uint32_t seed) {
    gpt_oss = true;
    norm = false;
    limit = lim;
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 0.5f);
    auto draw = [&](int64_t n) {
      std::vector<float> v(n);
      for (float& x : v) x = normal(rng);
      return v;
    };
    router_b = draw(E);
    gate_b = draw(E * F);
    up_b = draw(E * F);
    down_b = draw(E * D);
    for (auto* w : {&gate, &up}) {
      for (size_t i = 0; i < w->size(); i += 4) {
        float v;
        std::memcpy(&v, &(*w)[i], 4);
        v *= gain;
        std::memcpy(&(*w)[i], &v, 4);
      }
    }
  }
  MoeBiases biases() const {
    if (!gpt_oss) return {};
    return {router_b.data(), gate_b.data(), up_b.data(), down_b.data()};
  }

  Layer(int64_t e, int64_t d, int64_t f, int k, DType rt, DType et, uint32_t seed, bool nrm = true)
      : E(e), D(d), F(f), top_k(k), norm(nrm), router_t(rt), expert_t(et) {
    std::mt19937 rng(seed);
    router = rows(rt, E, D, rng);
    gate = rows(et, E * F, D, rng);
    up = rows(et, E * F, D, rng);
    down = rows(et, E * D, F, rng);
  }
  // Float weights scaled by 1/sqrt(K), so activations stay O(1); quantized ones as the matmul
  // tests make them.
  static std::vector<uint8_t> rows(DType t, int64_t n, int64_t k, std::mt19937& rng) {
    if (t != DType::F32) return testing::random_rows(t, n, k, rng);
    std::normal_distribution<float> normal(0.0f, 1.0f / std::sqrt(static_cast<float>(k)));
    std::vector<uint8_t> out(4 * n * k);
    for (int64_t i = 0; i < n * k; ++i) {
      const float v = normal(rng);
      std::memcpy(&out[4 * i], &v, 4);
    }
    return out;
  }
};

struct Packed {
  PackedWeight router;
  PackedExperts gate_up, down;
  MoeFfnWeights w;
  explicit Packed(Layer& l)
      : router(PackedWeight::pack(Tensor::borrow(l.router_t, {l.E, l.D}, l.router.data()))),
        gate_up(pack_experts({Tensor::borrow(l.expert_t, {l.E, l.F, l.D}, l.gate.data()),
                              Tensor::borrow(l.expert_t, {l.E, l.F, l.D}, l.up.data())})),
        down(pack_experts({Tensor::borrow(l.expert_t, {l.E, l.D, l.F}, l.down.data())})),
        w{&router, &gate_up, &down, l.top_k, l.norm} {
    if (l.gpt_oss) {
      w.gating = MoeGating::kSoftmaxTopK;
      w.swiglu_alpha = l.alpha;
      w.swiglu_limit = l.limit;
    }
  }
};

std::vector<float> run_moe(const MoeFfnWeights& w, const std::vector<float>& x, int64_t m, int nth,
                           const MoeBiases& biases = {}) {
  const int64_t d = w.router->k();
  std::vector<float> y(m * d, std::numeric_limits<float>::quiet_NaN());
  std::vector<uint8_t> buf(moe_ffn_scratch_bytes(w, m) + 64, 0xA5);
  void* scratch = buf.data() + (64 - reinterpret_cast<uintptr_t>(buf.data()) % 64) % 64;
  run_threads(nth, [&](const ExecContext& ctx) {
    moe_ffn(w, x.data(), m, y.data(), scratch, ctx, nullptr, biases);
  });
  return y;
}

// ---- the double-precision reference ------------------------------------------------------

// What a matmul with a quantized weight sees of its input: int8 codes per 32 inputs times
// their scale (the arithmetic of every quantized GEMM in kiln and ggml, see matmul_kernels.h).
std::vector<double> seen_input(DType w, const std::vector<double>& x) {
  if (is_float(w)) return x;
  std::vector<double> out(x.size());
  for (size_t b = 0; b < x.size() / 32; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j)
      amax = std::max(amax, std::fabs(static_cast<float>(x[b * 32 + j])));
    const float inv = amax > 0 ? 127.0f / amax : 0.0f;
    const double d = static_cast<double>(amax / 127.0f);
    for (int j = 0; j < 32; ++j) {
      const double q =
          std::clamp(std::nearbyint(static_cast<float>(x[b * 32 + j]) * inv), -127.0f, 127.0f);
      out[b * 32 + j] = q * d;
    }
  }
  return out;
}

// y = W x for W the n x k rows at `bytes` (dequantized), x as the matmul sees it.
std::vector<double> product(DType t, const uint8_t* bytes, int64_t n, int64_t k,
                            const std::vector<double>& x) {
  const std::vector<double> xs = seen_input(t, x);
  std::vector<float> row(k);
  std::vector<double> y(n);
  for (int64_t r = 0; r < n; ++r) {
    dequantize_row(t, bytes + r * dtype_bytes(t, k), row.data(), k);
    double acc = 0;
    for (int64_t c = 0; c < k; ++c) acc += static_cast<double>(row[c]) * xs[c];
    y[r] = acc;
  }
  return y;
}

// The experts a row picks (ties: lowest index) and their weights.
void reference_route(const Layer& l, const std::vector<double>& x, std::vector<int>& ids,
                     std::vector<double>& weights) {
  std::vector<double> p = product(l.router_t, l.router.data(), l.E, l.D, x);
  if (l.gpt_oss) {  // logits + bias; the top-k by logit, weighted by their own softmax
    for (int e = 0; e < l.E; ++e) p[e] += l.router_b[e];
    std::vector<int> order(l.E);
    for (int e = 0; e < l.E; ++e) order[e] = e;
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
    ids.assign(order.begin(), order.begin() + l.top_k);
    const double top = p[ids[0]];
    double sum = 0;
    weights.clear();
    for (int e : ids) sum += std::exp(p[e] - top);
    for (int e : ids) weights.push_back(std::exp(p[e] - top) / sum);
    return;
  }
  const double mx = *std::max_element(p.begin(), p.end());
  double sum = 0;
  for (double& v : p) sum += (v = std::exp(v - mx));
  for (double& v : p) v /= sum;
  std::vector<int> order(l.E);
  for (int e = 0; e < l.E; ++e) order[e] = e;
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
  ids.assign(order.begin(), order.begin() + l.top_k);
  weights.clear();
  double total = 0;
  for (int e : ids) total += p[e];
  for (int e : ids) weights.push_back(l.norm ? p[e] / total : p[e]);
}

std::vector<double> reference_row(const Layer& l, const float* xf) {
  const std::vector<double> x(xf, xf + l.D);
  std::vector<int> ids;
  std::vector<double> weights;
  reference_route(l, x, ids, weights);
  std::vector<double> y(l.D, 0.0);
  const size_t gate_bytes = dtype_bytes(l.expert_t, l.F * l.D);
  const size_t down_bytes = dtype_bytes(l.expert_t, l.D * l.F);
  for (int j = 0; j < l.top_k; ++j) {
    const int e = ids[j];
    const auto g = product(l.expert_t, l.gate.data() + e * gate_bytes, l.F, l.D, x);
    const auto u = product(l.expert_t, l.up.data() + e * gate_bytes, l.F, l.D, x);
    std::vector<double> a(l.F);
    for (int64_t i = 0; i < l.F; ++i) {
      if (l.gpt_oss) {
        const double gi = std::min(g[i] + l.gate_b[e * l.F + i], double(l.limit));
        const double ui = std::clamp(u[i] + l.up_b[e * l.F + i], -double(l.limit), double(l.limit));
        a[i] = gi / (1.0 + std::exp(-double(l.alpha) * gi)) * (ui + 1.0);
      } else {
        a[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
      }
    }
    const auto out = product(l.expert_t, l.down.data() + e * down_bytes, l.D, l.F, a);
    for (int64_t c = 0; c < l.D; ++c)
      y[c] += weights[j] * (out[c] + (l.gpt_oss ? l.down_b[e * l.D + c] : 0.0));
  }
  return y;
}

// Each row within `rel` of its own largest reference value (one int8 code of an expert's input
// may round the other way than in the reference: a step of amax/127 on one input).
void expect_close_to_reference(const Layer& l, const std::vector<float>& x,
                               const std::vector<float>& got, int64_t m, double rel) {
  for (int64_t i = 0; i < m; ++i) {
    const std::vector<double> want = reference_row(l, &x[i * l.D]);
    double scale = 0;
    for (double v : want) scale = std::max(scale, std::fabs(v));
    for (int64_t c = 0; c < l.D; ++c) {
      ASSERT_NEAR(got[i * l.D + c], want[c], rel * scale + 1e-6)
          << "row " << i << " column " << c << " " << dtype_name(l.expert_t);
    }
  }
}

// ---- tests ----------------------------------------------------------------------------------

TEST(MoeFfn, MatchesDoubleReferenceF32) {
  Layer l(8, 64, 48, 2, DType::F32, DType::F32, 11);
  Packed p(l);
  std::mt19937 rng(3);
  const int64_t m = 6;
  const auto x = testing::random_acts(m, l.D, rng);
  for (int nth : {1, 2}) expect_close_to_reference(l, x, run_moe(p.w, x, m, nth), m, 2e-5);
}

TEST(MoeFfn, MatchesDoubleReferenceQ8_0) {
  Layer l(8, 96, 64, 2, DType::Q8_0, DType::Q8_0, 12);
  Packed p(l);
  std::mt19937 rng(4);
  const int64_t m = 9;  // above the 8-row tile: pair kernels on AVX-512
  const auto x = testing::random_acts(m, l.D, rng);
  expect_close_to_reference(l, x, run_moe(p.w, x, m, 2), m, 5e-3);
}

TEST(MoeFfn, WithoutRenormalizationAndWithAnF32RouterOverQuantizedExperts) {
  Layer l(6, 64, 32, 3, DType::F32, DType::Q8_0, 13, /*norm=*/false);
  Packed p(l);
  std::mt19937 rng(5);
  const int64_t m = 4;
  const auto x = testing::random_acts(m, l.D, rng);
  expect_close_to_reference(l, x, run_moe(p.w, x, m, 2), m, 5e-3);
}

// gpt-oss: biases everywhere, top-k by logit then softmax over those k, the clamped SwiGLU
// (gate/up weights 6x larger, so a good share of the gates and ups are clamped at 2).
TEST(MoeFfn, GptOssMatchesDoubleReference) {
  for (DType t : {DType::F32, DType::Q8_0}) {
    Layer l(8, 64, 32, 2, DType::F32, t, 15);
    l.make_gpt_oss(2.0f, t == DType::F32 ? 6.0f : 1.0f, 16);
    Packed p(l);
    std::mt19937 rng(8);
    const int64_t m = 9;
    const auto x = testing::random_acts(m, l.D, rng);
    for (int nth : {1, 3}) {
      const auto got = run_moe(p.w, x, m, nth, l.biases());
      expect_close_to_reference(l, x, got, m, t == DType::F32 ? 2e-5 : 5e-3);
      // Without its biases, clamps and routing it is another function.
      Packed plain(l);
      plain.w.gating = MoeGating::kSoftmax;
      plain.w.swiglu_limit = 0;
      EXPECT_FALSE(bits_equal(run_moe(plain.w, x, m, nth), got));
    }
  }
}

// Alone or in a batch, on 1 or 3 threads: the same bits (biases and clamps are per value).
TEST(MoeFfn, GptOssBatchAndThreadInvariant) {
  Layer l(8, 64, 32, 2, DType::F32, DType::Q8_0, 17);
  l.make_gpt_oss(7.0f, 1.0f, 18);
  Packed p(l);
  std::mt19937 rng(9);
  const int64_t m = 5;
  const auto batch = testing::random_acts(m, l.D, rng);
  const auto all = run_moe(p.w, batch, m, 2, l.biases());
  EXPECT_TRUE(bits_equal(run_moe(p.w, batch, m, 3, l.biases()), all));
  for (int64_t i = 0; i < m; ++i) {
    const std::vector<float> row(batch.begin() + i * l.D, batch.begin() + (i + 1) * l.D);
    const std::vector<float> want(all.begin() + i * l.D, all.begin() + (i + 1) * l.D);
    EXPECT_TRUE(bits_equal(run_moe(p.w, row, 1, 1, l.biases()), want)) << "row " << i;
  }
}

TEST(MoeFfn, EveryExpertUsedWhenTopKIsAll) {
  Layer l(4, 64, 32, 4, DType::Q8_0, DType::F32, 14);
  Packed p(l);
  std::mt19937 rng(6);
  const auto x = testing::random_acts(3, l.D, rng);
  expect_close_to_reference(l, x, run_moe(p.w, x, 3, 2), 3, 5e-3);
}

// A row's output is bit-identical alone and at any place in a batch of 7 with other rows, on
// 1, 2 and 3 threads.
TEST(MoeFfn, BatchAndThreadInvariant) {
  for (DType t : {DType::F32, DType::Q8_0, DType::Q4_K}) {
    const int64_t d = t == DType::Q4_K ? 256 : 64, f = t == DType::Q4_K ? 256 : 96;
    Layer l(8, d, f, 2, t, t, 21);
    Packed p(l);
    std::mt19937 rng(7);
    const int64_t m = 7;
    const auto batch = testing::random_acts(m, l.D, rng);
    const auto all = run_moe(p.w, batch, m, 2);
    for (int nth : {1, 3}) EXPECT_TRUE(bits_equal(run_moe(p.w, batch, m, nth), all)) << nth;
    for (int64_t i = 0; i < m; ++i) {
      const std::vector<float> row(batch.begin() + i * d, batch.begin() + (i + 1) * d);
      const std::vector<float> want(all.begin() + i * d, all.begin() + (i + 1) * d);
      EXPECT_TRUE(bits_equal(run_moe(p.w, row, 1, 2), want)) << dtype_name(t) << " row " << i;
    }
    // Reversed order: every row's experts see their rows in another order and with others.
    std::vector<float> reversed(batch.size());
    for (int64_t i = 0; i < m; ++i)
      std::copy(batch.begin() + i * d, batch.begin() + (i + 1) * d,
                reversed.begin() + (m - 1 - i) * d);
    const auto rev = run_moe(p.w, reversed, m, 2);
    for (int64_t i = 0; i < m; ++i)
      EXPECT_TRUE(std::equal(rev.begin() + (m - 1 - i) * d, rev.begin() + (m - i) * d,
                             all.begin() + i * d,
                             [](float a, float b) { return std::memcmp(&a, &b, 4) == 0; }))
          << dtype_name(t) << " row " << i;
  }
}

TEST(MoeFfn, RouteRowTiesGoToTheLowestExpert) {
  std::vector<float> logits = {1.0f, 3.0f, 0.5f, 3.0f, 3.0f, -2.0f};
  int32_t ids[3];
  float w[3];
  moe_route_row(logits.data(), 6, 3, true, ids, w);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 3);
  EXPECT_EQ(ids[2], 4);
  EXPECT_EQ(w[0], w[1]);
  EXPECT_EQ(w[1], w[2]);
  EXPECT_NEAR(w[0], 1.0 / 3.0, 1e-7);

  std::vector<float> two = {0.0f, 2.0f, 1.0f, 2.0f};
  moe_route_row(two.data(), 4, 2, false, ids, w);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(ids[1], 3);
  const double p = std::exp(2.0) / (1.0 + 2.0 * std::exp(2.0) + std::exp(1.0));
  EXPECT_NEAR(w[0], p, 1e-6);  // softmax probabilities, not renormalized
}

// DeepSeek V2's group-limited greedy routing: softmax scores, the best groups by their best
// expert, the top-k within them, weights times routed_scale (not renormalized).
TEST(MoeFfn, RouteRowGroupLimitedSoftmax) {
  // Groups of 2: {0,1} best 2.0, {2,3} best 3.0, {4,5} best 2.5; expert 1 (2.0) would be in a
  // plain top-3 but its group is not among the best two.
  std::vector<float> logits = {1.9f, 2.0f, 3.0f, -1.0f, 2.5f, 1.95f};
  std::vector<float> choice(6);
  MoeRouting r;
  r.top_k = 3;
  r.norm_topk_prob = false;
  r.n_groups = 3;
  r.topk_groups = 2;
  r.routed_scale = 16.0f;
  std::vector<double> p(6);
  double z = 0;
  for (int e = 0; e < 6; ++e) z += std::exp(static_cast<double>(logits[e]));
  for (int e = 0; e < 6; ++e) p[e] = std::exp(static_cast<double>(logits[e])) / z;
  int32_t ids[3];
  float w[3];
  moe_route_row(logits.data(), 6, r, nullptr, choice.data(), ids, w);
  EXPECT_EQ(ids[0], 2);
  EXPECT_EQ(ids[1], 4);
  EXPECT_EQ(ids[2], 5);
  EXPECT_NEAR(w[0], 16.0 * p[2], 1e-5);
  EXPECT_NEAR(w[2], 16.0 * p[5], 1e-5);
}

// DeepSeek V3's noaux_tc routing: sigmoid scores; the bias steers the choice (and a group's
// score is the sum of its two best) but the weights are the unbiased scores, renormalized.
TEST(MoeFfn, RouteRowSigmoidWithScoreBias) {
  std::vector<float> logits = {0.0f, 1.0f, 2.0f, 0.5f, -1.0f, 0.2f, 0.1f, 0.3f};
  const std::vector<float> bias = {0.0f, 0.0f, 0.0f, 0.0f, 3.0f, 0.0f, 0.0f, 0.0f};
  std::vector<float> choice(8);
  MoeRouting r;
  r.top_k = 2;
  r.norm_topk_prob = true;
  r.gating = MoeGating::kSigmoid;
  r.n_groups = 4;  // {0,1} {2,3} {4,5} {6,7}
  r.topk_groups = 2;
  r.routed_scale = 2.5f;
  auto sig = [](double v) { return 1.0 / (1.0 + std::exp(-v)); };
  int32_t ids[2];
  float w[2];
  moe_route_row(logits.data(), 8, r, bias.data(), choice.data(), ids, w);
  // Group scores: {0,1} 1.23, {2,3} 1.50, {4,5} 3.27 + 0.55 (the bias lifts expert 4), {6,7}
  // 1.10. Chosen groups {4,5} and {2,3}; top-2 by choice: 4 (3.27), then 2 (0.88).
  EXPECT_EQ(ids[0], 4);
  EXPECT_EQ(ids[1], 2);
  const double s4 = sig(-1.0), s2 = sig(2.0);
  EXPECT_NEAR(w[0], 2.5 * s4 / (s4 + s2), 1e-6);
  EXPECT_NEAR(w[1], 2.5 * s2 / (s4 + s2), 1e-6);
}

// Experts 1, 4 and 6 have the same router row, so every row gives them equal logits (the same
// dot product): with top_k 2 the kernel must take 1 and 4, as the reference does.
TEST(MoeFfn, TiedExpertsInTheKernelGoToTheLowestIndex) {
  Layer l(8, 64, 32, 2, DType::F32, DType::F32, 31);
  // The F32 router's values, edited as floats and written back (no type-punned pointer).
  std::vector<float> r(static_cast<size_t>(l.E * l.D));
  std::memcpy(r.data(), l.router.data(), r.size() * sizeof(float));
  for (int64_t c = 0; c < l.D; ++c) {
    r[1 * l.D + c] = 4.0f * r[c];  // large: the tied experts are the top ones
    r[4 * l.D + c] = r[1 * l.D + c];
    r[6 * l.D + c] = r[1 * l.D + c];
  }
  std::memcpy(l.router.data(), r.data(), r.size() * sizeof(float));
  Packed p(l);
  std::mt19937 rng(8);
  auto x = testing::random_acts(5, l.D, rng);
  // Rows aligned with the router row: experts 1, 4, 6 lead by far.
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t c = 0; c < l.D; ++c) x[i * l.D + c] = 0.2f * x[i * l.D + c] + r[c];
  const auto got = run_moe(p.w, x, 5, 2);
  for (int64_t i = 0; i < 5; ++i) {
    std::vector<int> ids;
    std::vector<double> w;
    reference_route(l, std::vector<double>(&x[i * l.D], &x[(i + 1) * l.D]), ids, w);
    ASSERT_EQ(ids, (std::vector<int>{1, 4})) << "row " << i;
  }
  expect_close_to_reference(l, x, got, 5, 2e-5);
}

TEST(MoeFfn, ZeroRowsIsANoOp) {
  Layer l(4, 64, 32, 2, DType::F32, DType::F32, 41);
  Packed p(l);
  EXPECT_NO_THROW(run_moe(p.w, {}, 0, 2));
}

}  // namespace
}  // namespace kiln::kernels
