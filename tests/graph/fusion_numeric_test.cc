// Numeric tests of the fusion passes: for each pass, a small graph containing its pattern is
// run unfused and fused, in eager mode (Interpreter) and as a captured Plan, at several batch
// sizes and odd widths. The fused kernels are built to compute exactly what the ops they
// replace compute, so every output and the KV pool bytes must be BIT-IDENTICAL, not close.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "graph/numeric_runs.h"
#include "graph/random_weights.h"
#include "kiln/graph/builder.h"
#include "kiln/graph/passes/fuse_add_rms_norm.h"
#include "kiln/graph/passes/fuse_gated_activation.h"
#include "kiln/graph/passes/fuse_lm_head_argmax.h"
#include "kiln/graph/passes/fuse_matmul_add.h"
#include "kiln/graph/passes/fuse_matmul_merge.h"
#include "kiln/graph/passes/fuse_qk_norm_rope_kv_write.h"
#include "kiln/graph/passes/inplace.h"
#include "kiln/graph/printer.h"

namespace kiln::graph {
namespace {

using testing::paged_step;
using testing::random_input;
using testing::RandomWeights;
using testing::same_bits;
using testing::StepData;

constexpr int64_t kBatches[] = {1, 3, 8};

ThreadPool& pool(int n) {
  static ThreadPool one(1), two(2);
  return n == 1 ? one : two;
}

int count_op(const Graph& g, Op op) {
  int n = 0;
  for (const Node& node : g.nodes()) n += node.op == op;
  return n;
}

// Runs `pass` and then the inplace analysis on a copy of `unfused`; requires the fused ops
// counted in `want` afterwards (and as many patterns reported fused); then checks that eager and
// captured runs of both graphs (with and without in-place aliasing, on 1 and 2 threads, with one
// barrier per level or per step) agree bit for bit with the eager run of the unfused graph.
void check_fusion(const Graph& unfused, PassFn pass, const std::map<Op, int>& want,
                  const StepData& data, RandomWeights& weights) {
  weights.declare(unfused);
  Graph fused = unfused;
  const PassResult r = pass(fused, PassOptions{});
  ASSERT_NO_THROW(verify(fused)) << print(fused);
  int patterns = 0;
  for (const auto& [op, n] : want) {
    ASSERT_EQ(count_op(fused, op), n) << op_name(op) << "\n" << print(fused);
    patterns += n;
  }
  ASSERT_EQ(r.counter("patterns_fused"), patterns);
  Graph unfused_inplace = unfused;
  run_inplace(unfused_inplace, PassOptions{});
  Graph fused_inplace = fused;
  run_inplace(fused_inplace, PassOptions{});

  const testing::RunResult want_bits = testing::run_interpreted(unfused, data, weights, pool(2));
  EXPECT_TRUE(same_bits(want_bits, testing::run_interpreted(unfused, data, weights, pool(1))))
      << "unfused, eager, 1 thread";
  EXPECT_TRUE(same_bits(want_bits, testing::run_planned(unfused_inplace, data, weights, pool(2))))
      << "unfused, plan";
  EXPECT_TRUE(same_bits(want_bits, testing::run_interpreted(fused, data, weights, pool(2))))
      << "fused, eager\n"
      << print(fused);
  EXPECT_TRUE(same_bits(want_bits, testing::run_interpreted(fused, data, weights, pool(1))))
      << "fused, eager, 1 thread";
  EXPECT_TRUE(same_bits(want_bits, testing::run_planned(fused, data, weights, pool(2))))
      << "fused, plan without in-place";
  EXPECT_TRUE(same_bits(want_bits, testing::run_planned(fused_inplace, data, weights, pool(2))))
      << "fused, plan\n"
      << print(fused_inplace);
  EXPECT_TRUE(same_bits(want_bits, testing::run_planned(fused_inplace, data, weights, pool(1))))
      << "fused, plan, 1 thread";
  PlanOptions per_step;
  per_step.level_barriers = false;
  EXPECT_TRUE(
      same_bits(want_bits, testing::run_planned(fused_inplace, data, weights, pool(2), per_step)))
      << "fused, plan, one barrier per step";
  PlanOptions groups;
  groups.group_threshold = 100;  // every level with several nodes runs on disjoint worker groups
  EXPECT_TRUE(
      same_bits(want_bits, testing::run_planned(fused_inplace, data, weights, pool(2), groups)))
      << "fused, plan, worker groups";
}

// Widths K of matmul inputs: a whole number of blocks, odd where the dtype allows.
int64_t k_for(DType t) {
  const int block = dtype_info(t).block_size;
  return block == 1 ? 77 : 256;
}

std::string dtype_param_name(const ::testing::TestParamInfo<DType>& info) {
  return std::string(dtype_name(info.param));
}

const auto kWeightDtypes =
    ::testing::Values(DType::F32, DType::F16, DType::BF16, DType::Q4_0, DType::Q5_0, DType::Q8_0,
                      DType::Q4_K, DType::Q5_K, DType::Q6_K);

// ---- add + rms_norm ----

TEST(FusionNumeric, AddRmsNorm) {
  for (int64_t T : kBatches) {
    SCOPED_TRACE(T);
    const int64_t D = 67;
    StepData data;
    data.inputs = {random_input("x", {T, D}, 1), random_input("r", {T, D}, 2)};
    Builder b("add_rms_norm");
    auto in = testing::declare_inputs(b, data);
    Value w1 = b.param("norm1", DType::F32, {D});
    Value w2 = b.param("norm2", DType::F32, {D});
    Value s = b.add(b.scale(in["x"], 0.5), in["r"]);  // the residual sum, an intermediate
    Value n = b.rms_norm(s, w1, 1e-6);
    Value s2 = b.add(in["r"], n);  // a second sum, also returned
    Value n2 = b.rms_norm(s2, w2, 1e-5);
    b.output(b.mul(n2, s));  // the first sum is read after both norms
    b.output(s2);
    RandomWeights weights(11);
    check_fusion(b.finish(), run_fuse_add_rms_norm, {{Op::AddRmsNorm, 2}}, data, weights);
  }
}

TEST(FusionNumeric, AddRmsNormOverHeads) {
  // A per-head norm of a residual sum: rows of a rank-3 view, the norm over the last dim.
  for (int64_t T : kBatches) {
    SCOPED_TRACE(T);
    StepData data;
    data.inputs = {random_input("x", {T, 3, 24}, 3), random_input("r", {T, 3, 24}, 4)};
    Builder b("add_rms_norm_heads");
    auto in = testing::declare_inputs(b, data);
    Value s = b.add(b.silu(in["x"]), in["r"]);
    b.output(b.scale(b.rms_norm(s, b.param("head_norm", DType::F32, {24}), 1e-6), 3.0));
    RandomWeights weights(12);
    check_fusion(b.finish(), run_fuse_add_rms_norm, {{Op::AddRmsNorm, 1}}, data, weights);
  }
}

// ---- gelu/silu * mul ----

TEST(FusionNumeric, GatedActivation) {
  for (int64_t T : kBatches) {
    SCOPED_TRACE(T);
    const int64_t F = 75;
    StepData data;
    data.inputs = {random_input("x", {T, F}, 5), random_input("u", {T, F}, 6)};
    Builder b("gated");
    auto in = testing::declare_inputs(b, data);
    Value g = b.scale(in["x"], 1.25);
    Value h1 = b.mul(b.gelu(g), in["u"]);  // gate first
    Value h2 = b.mul(in["u"], b.silu(g));  // gate second
    Value h3 = b.mul(b.silu(h1), h2);      // the gate is a fused output, up another
    b.output(b.add(h3, h2));
    RandomWeights weights(13);
    check_fusion(b.finish(), run_fuse_gated_activation, {{Op::GeluMul, 1}, {Op::SiluMul, 2}}, data,
                 weights);
  }
}

// ---- merged projections ----

class FusionNumericDtype : public ::testing::TestWithParam<DType> {};

TEST_P(FusionNumericDtype, MatmulMerge) {
  const DType wt = GetParam();
  const int64_t K = k_for(wt);
  // A second dtype for a projection that must stay alone (weights of one merged GEMM share a
  // dtype).
  const DType other = wt == DType::F16 ? DType::F32 : DType::F16;
  for (int64_t T : kBatches) {
    SCOPED_TRACE(T);
    StepData data;
    data.inputs = {random_input("x", {T, K}, 7)};
    Builder b("merge");
    auto in = testing::declare_inputs(b, data);
    Value n = b.rms_norm(in["x"], b.param("norm", DType::F32, {K}), 1e-6);
    // Q, K, V of odd widths (the packed weight pads to 16-row groups) and a lone f16 one.
    b.output(b.matmul(n, b.param("wq", wt, {37, K})));
    b.output(b.matmul(n, b.param("wk", wt, {21, K})));
    b.output(b.matmul(n, b.param("w_other", other, {19, K})));
    b.output(b.matmul(n, b.param("wv", wt, {21, K})));
    // A second group, over the graph input itself.
    b.output(b.matmul(in["x"], b.param("wa", wt, {16, K})));
    b.output(b.silu(b.matmul(in["x"], b.param("wb", wt, {5, K}))));
    RandomWeights weights(14);
    check_fusion(b.finish(), run_fuse_matmul_merge, {{Op::MatmulSplit, 2}}, data, weights);
    EXPECT_GT(weights.concat_packs(), 0);  // the merged weights were really used
  }
}

TEST_P(FusionNumericDtype, MatmulAdd) {
  const DType wt = GetParam();
  const int64_t K = k_for(wt);
  const int64_t N = 45;
  for (int64_t T : kBatches) {
    SCOPED_TRACE(T);
    StepData data;
    data.inputs = {random_input("x", {T, K}, 8), random_input("x2", {T, N}, 9),
                   random_input("r", {T, N}, 10)};
    Builder b("matmul_add");
    auto in = testing::declare_inputs(b, data);
    Value res = b.scale(in["r"], 2.0);  // residual: an intermediate
    Value s = b.add(res, b.matmul(in["x"], b.param("w1", wt, {N, K})));  // matmul second
    // Matmul first; its residual is a graph input. x2 is N wide, so w2 is [N, N] (float types
    // only: N is not a whole number of quantized blocks).
    const DType w2t = dtype_info(wt).block_size == 1 ? wt : DType::F16;
    Value t = b.add(b.matmul(in["x2"], b.param("w2", w2t, {N, N})), in["r"]);
    b.output(b.add(s, t));
    b.output(s);
    RandomWeights weights(15);
    check_fusion(b.finish(), run_fuse_matmul_add, {{Op::MatmulAdd, 2}}, data, weights);
  }
}

// ---- greedy LM head ----

TEST_P(FusionNumericDtype, LmHeadArgmax) {
  const DType wt = GetParam();
  const int64_t K = k_for(wt);
  const int64_t V = 301;
  for (int64_t T : kBatches) {
    SCOPED_TRACE(T);
    StepData data;
    data.inputs = {random_input("x", {T, K}, 16)};
    Builder b("lm_head");
    auto in = testing::declare_inputs(b, data);
    Value h = b.scale(in["x"], 0.7);
    Value n = b.rms_norm(h, b.param("output_norm", DType::F32, {K}), 1e-6);
    b.output(b.argmax(b.matmul(n, b.param("output", wt, {V, K}))));
    RandomWeights weights(17);
    check_fusion(b.finish(), run_fuse_lm_head_argmax, {{Op::NormMatmulArgmax, 1}}, data, weights);
  }
}

INSTANTIATE_TEST_SUITE_P(Weights, FusionNumericDtype, kWeightDtypes, dtype_param_name);

// ---- qk norm + rope + kv write, with the attention that reads the write ----

struct AttnLayout {
  bool heads_as_rows;  // [T*H, hd] per-head view (the model's) or [T, H, hd]
  bool neox;
  int n_rot = 0;         // partial rotary (Phi-4-mini): rotated dims of each head; 0: all
  bool factors = false;  // Llama 3 frequency factors, one param shared by the layers
};

class FusionNumericQk : public ::testing::TestWithParam<AttnLayout> {};

// Two layers of self-attention over a paged pool with history, each layer's q/k normed per
// head, roped and (k, v) written before its attention (scores softcapped when softcap > 0).
Graph attention_layers(const StepData& data, int64_t T, int64_t D, int heads, const AttnLayout& L,
                       float softcap = 0.0f) {
  const KvGeometry& kv = data.kv;
  const int hd = kv.head_dim, kvh = kv.n_kv_heads;
  Builder b("attention");
  auto in = testing::declare_inputs(b, data);
  Value pool = b.state("kv_pool", DType::F16,
                       {2 * static_cast<int64_t>(kv.n_layers), kv.n_pages, kv.page_size,
                        static_cast<int64_t>(kvh) * hd});
  auto head_norm = [&](Value x, int n, const std::string& w) {
    Value rows = L.heads_as_rows ? b.reshape(x, {T * n, hd}) : b.reshape(x, {T, n, hd});
    Value normed = b.rms_norm(rows, b.param(w, DType::F32, {hd}), 1e-6);
    return b.reshape(normed, {T, static_cast<int64_t>(n) * hd});
  };
  const int n_rot = L.n_rot == 0 ? hd : L.n_rot;
  std::optional<Value> factors;
  if (L.factors) factors = b.param("rope_freqs.weight", DType::F32, {n_rot / 2});
  Value x = in["x"];
  for (int l = 0; l < kv.n_layers; ++l) {
    const std::string blk = "blk." + std::to_string(l) + ".";
    Value q = b.matmul(x, b.param(blk + "q", DType::F16, {heads * hd, D}));
    Value k = b.matmul(x, b.param(blk + "k", DType::F16, {kvh * hd, D}));
    Value v = b.matmul(x, b.param(blk + "v", DType::F16, {kvh * hd, D}));
    q = b.rope(head_norm(q, heads, blk + "q_norm"), in["positions"], hd, 10000.0 + l, L.neox,
               factors, L.n_rot);
    k = b.rope(head_norm(k, kvh, blk + "k_norm"), in["positions"], hd, 10000.0 + l, L.neox, factors,
               L.n_rot);
    pool = b.kv_write(pool, k, v, in["out_cache_slots"], l);
    AttentionSpec spec{l, heads, kvh, hd, l == 1 ? 7 : 0, 1.0f / std::sqrt(float(hd)), softcap};
    Value a = b.attention(q, pool, in["block_table"], in["seq_lens"], in["positions"],
                          in["token_seq"], spec);
    x = b.add(x, b.matmul(a, b.param(blk + "o", DType::F16, {D, heads * hd})));
  }
  b.output(x);
  return b.finish();
}

// Llama 3-like frequency factors (1 for the fastest frequencies rising to 8 for the slowest)
// instead of random ones: factors must be positive.
void set_llama3_factors(const Graph& g, RandomWeights& weights) {
  const auto ff = g.find_source(Op::Param, "rope_freqs.weight");
  ASSERT_TRUE(ff.has_value());
  const Tensor& t = weights.tensor("rope_freqs.weight", g.type(*ff));
  const int64_t n = t.shape().numel();
  for (int64_t i = 0; i < n; ++i)
    t.data_as<float>()[i] = 1.0f + 7.0f * static_cast<float>(i * i) / static_cast<float>(n * n);
}

TEST_P(FusionNumericQk, QkNormRopeKvWrite) {
  const AttnLayout layout = GetParam();
  KvGeometry kv;
  kv.n_layers = 2;
  kv.n_pages = 16;
  kv.page_size = 16;
  kv.n_kv_heads = 1;
  kv.head_dim = 32;
  const int64_t D = 53;
  const int heads = 3;
  for (int64_t T : kBatches) {
    for (bool inert : {false, true}) {
      if (inert && T == 1) continue;
      SCOPED_TRACE(::testing::Message() << "T=" << T << " inert=" << inert);
      StepData data = paged_step(T, kv, 20 + T, inert);
      data.inputs.push_back(random_input("x", {T, D}, 21));
      RandomWeights weights(22);
      const Graph g = attention_layers(data, T, D, heads, layout);
      if (layout.factors) set_llama3_factors(g, weights);
      check_fusion(g, run_fuse_qk_norm_rope_kv_write, {{Op::QkNormRopeKvWrite, 2}}, data, weights);
    }
  }
}

// Gemma 2's attention-logit softcap: eager and captured runs (fused or not, 1 or 2 threads)
// agree bit for bit, and the cap really reaches the kernel (a small cap changes the output).
TEST(FusionNumeric, AttentionSoftcapEagerEqualsPlan) {
  KvGeometry kv;
  kv.n_layers = 2;
  kv.n_pages = 16;
  kv.page_size = 16;
  kv.n_kv_heads = 1;
  kv.head_dim = 32;
  const int64_t D = 53;
  const int heads = 3;
  const AttnLayout layout{false, true};
  for (int64_t T : kBatches) {
    SCOPED_TRACE(::testing::Message() << "T=" << T);
    StepData data = paged_step(T, kv, 40 + T, T > 1);
    data.inputs.push_back(random_input("x", {T, D}, 41));
    RandomWeights weights(42);
    const Graph capped = attention_layers(data, T, D, heads, layout, 0.5f);
    for (const Node& n : capped.nodes()) {
      if (n.op == Op::Attention) {
        ASSERT_EQ(n.attrs.get_float("softcap"), 0.5);
      }
    }
    check_fusion(capped, run_fuse_qk_norm_rope_kv_write, {{Op::QkNormRopeKvWrite, 2}}, data,
                 weights);
    const Graph plain = attention_layers(data, T, D, heads, layout);
    weights.declare(plain);
    EXPECT_FALSE(same_bits(testing::run_interpreted(plain, data, weights, pool(2)),
                           testing::run_interpreted(capped, data, weights, pool(2))));
  }
}

INSTANTIATE_TEST_SUITE_P(
    Layouts, FusionNumericQk,
    ::testing::Values(AttnLayout{true, true}, AttnLayout{true, false}, AttnLayout{false, true},
                      AttnLayout{false, false}, AttnLayout{true, true, 24, true},
                      AttnLayout{true, false, 24, true}, AttnLayout{false, true, 0, true},
                      AttnLayout{false, false, 10, false}),
    [](const ::testing::TestParamInfo<AttnLayout>& info) {
      const AttnLayout& l = info.param;
      return std::string(l.heads_as_rows ? "RowsPerHead" : "Rank3") + (l.neox ? "Neox" : "Pairs") +
             (l.n_rot ? "Rot" + std::to_string(l.n_rot) : "") + (l.factors ? "Factors" : "");
    });

}  // namespace
}  // namespace kiln::graph

namespace kiln::graph {
namespace {

TEST(FusionNumeric, MatmulMergeOfMoreProjectionsThanASplitHolds) {
  // Six projections of one activation (a model with extra heads, or Q/K/V/gate/up of a
  // parallel block). A merged GEMM writes at most 4 outputs (Step::out), so the pass must
  // merge them in groups the lowering can take, not one group of six.
  const int64_t K = 64;
  for (int64_t T : kBatches) {
    SCOPED_TRACE(T);
    StepData data;
    data.inputs = {random_input("x", {T, K}, 30)};
    Builder b("merge6");
    auto in = testing::declare_inputs(b, data);
    for (int i = 0; i < 6; ++i)
      b.output(b.matmul(in["x"], b.param(fmt::format("w{}", i), DType::Q8_0, {16 + 3 * i, K})));
    RandomWeights weights(31);
    check_fusion(b.finish(), run_fuse_matmul_merge, {{Op::MatmulSplit, 2}}, data, weights);
  }
}

}  // namespace
}  // namespace kiln::graph
