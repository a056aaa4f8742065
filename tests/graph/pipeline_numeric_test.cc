// The whole optimizing pipeline on the real model code (model::build_forward) with random
// weights: small Gemma-3-, Llama-, Qwen-2- and Qwen-3-shaped configs at odd widths, several
// weight types and batch sizes. The optimized graph, in eager mode and as a captured plan, must
// give bit-identical outputs and KV pool bytes to the traced graph run eagerly, and no pattern
// a fusion pass promises to remove may be left.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "graph/fusion_patterns.h"
#include "graph/numeric_runs.h"
#include "graph/random_weights.h"
#include "kiln/graph/passes/pipeline.h"
#include "kiln/graph/printer.h"
#include "kiln/model/transformer.h"

namespace kiln::graph {
namespace {

using model::ModelConfig;
using model::WeightMeta;

enum class Arch { Gemma3, Llama, Qwen2, Qwen3 };

struct Case {
  Arch arch;
  DType weights;
};

std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  static const char* names[] = {"Gemma3", "Llama", "Qwen2", "Qwen3"};
  return std::string(names[static_cast<int>(info.param.arch)]) + "_" +
         std::string(dtype_name(info.param.weights));
}

// Widths are whole blocks of the weight type, odd where it allows; head_dim stays a multiple
// of 16 (attention's vector paths).
ModelConfig config_for(const Case& k) {
  ModelConfig c;
  const int block = dtype_info(k.weights).block_size;
  c.n_layers = 3;
  c.n_embd = block == 1 ? 53 : block == 32 ? 96 : 256;
  c.n_ff = block == 1 ? 75 : block == 32 ? 160 : 512;
  c.head_dim = block == 256 ? 64 : 32;
  c.n_heads = block == 256 ? 4 : 3;
  c.n_kv_heads = 1;
  c.vocab = 301;
  c.context_length = 256;
  c.rms_eps = 1e-6;
  c.attention_scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  c.layers.assign(c.n_layers, model::LayerConfig{false, 0, 10000.0});
  switch (k.arch) {
    case Arch::Gemma3:
      c.arch = "gemma3";
      c.rope_neox = true;
      c.qk_norm = c.post_norms = c.scale_embeddings = c.tied_output = true;
      c.activation = model::Activation::GeluTanh;
      c.layers[0] = c.layers[1] = model::LayerConfig{true, 7, 10000.0};  // local layers
      c.layers[2].rope_base = 1e6;
      break;
    case Arch::Llama:
      c.arch = "llama";
      c.n_kv_heads = block == 256 ? 2 : 1;
      break;
    case Arch::Qwen2:
      c.arch = "qwen2";
      c.rope_neox = c.qkv_bias = c.tied_output = true;
      break;
    case Arch::Qwen3:
      c.arch = "qwen3";
      c.rope_neox = c.qk_norm = true;
      c.n_kv_heads = block == 256 ? 2 : 1;
      break;
  }
  return c;
}

// The tensors a model file of this config would hold. Layer 1's V projection is f16, as in
// mixed quantizations, so its Q/K/V do not all merge.
std::map<std::string, WeightMeta> tensors_for(const ModelConfig& c, DType wt) {
  std::map<std::string, WeightMeta> t;
  const int64_t D = c.n_embd, F = c.n_ff, hd = c.head_dim;
  const int64_t q = c.n_heads * hd, kv = c.n_kv_heads * hd;
  auto vec = [](int64_t n) { return WeightMeta{DType::F32, Shape{n}}; };
  t["token_embd.weight"] = {wt, {c.vocab, D}};
  t["output_norm.weight"] = vec(D);
  if (!c.tied_output) t["output.weight"] = {wt, {c.vocab, D}};
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    t[b + "attn_norm.weight"] = vec(D);
    t[b + "attn_q.weight"] = {wt, {q, D}};
    t[b + "attn_k.weight"] = {wt, {kv, D}};
    t[b + "attn_v.weight"] = {l == 1 ? DType::F16 : wt, {kv, D}};
    if (c.qkv_bias) {
      t[b + "attn_q.bias"] = vec(q);
      t[b + "attn_k.bias"] = vec(kv);
      t[b + "attn_v.bias"] = vec(kv);
    }
    if (c.qk_norm) {
      t[b + "attn_q_norm.weight"] = vec(hd);
      t[b + "attn_k_norm.weight"] = vec(hd);
    }
    t[b + "attn_output.weight"] = {wt, {D, q}};
    t[b + "ffn_norm.weight"] = vec(D);
    t[b + "ffn_gate.weight"] = {wt, {F, D}};
    t[b + "ffn_up.weight"] = {wt, {F, D}};
    t[b + "ffn_down.weight"] = {wt, {D, F}};
    if (c.post_norms) {
      t[b + "post_attention_norm.weight"] = vec(D);
      t[b + "post_ffw_norm.weight"] = vec(D);
    }
  }
  return t;
}

int count_op(const Graph& g, Op op) {
  int n = 0;
  for (const Node& node : g.nodes()) n += node.op == op;
  return n;
}

class PipelineNumeric : public ::testing::TestWithParam<Case> {};

TEST_P(PipelineNumeric, OptimizedEqualsTracedBitForBit) {
  const Case k = GetParam();
  const ModelConfig c = config_for(k);
  const auto tensors = tensors_for(c, k.weights);
  const model::WeightLookup lookup = [&](const std::string& name) -> std::optional<WeightMeta> {
    auto it = tensors.find(name);
    if (it == tensors.end()) return std::nullopt;
    return it->second;
  };
  KvGeometry kv;
  kv.n_layers = c.n_layers;
  kv.n_pages = 16;
  kv.page_size = 16;
  kv.n_kv_heads = c.n_kv_heads;
  kv.head_dim = c.head_dim;
  ThreadPool pool(2);
  for (int64_t T : {1, 3, 8}) {
    for (bool greedy : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "T=" << T << (greedy ? " greedy" : " logits"));
      const bool inert = T == 8;  // a padded batch
      testing::StepData data = testing::paged_step(T, kv, 50 + T, inert);
      std::mt19937 rng(51 + T);
      Tensor ids = Tensor::empty(DType::I32, {T});
      for (int64_t i = 0; i < T; ++i)
        ids.data_as<int32_t>()[i] = static_cast<int32_t>(rng() % c.vocab);
      data.inputs.push_back({model::input_names::kTokenIds, ids});
      model::ForwardShape shape;
      shape.tokens = T;
      shape.seqs = data.inputs[3].tensor.shape()[0];  // block_table rows
      shape.max_pages_per_seq = data.inputs[3].tensor.shape()[1];
      shape.greedy = greedy;
      shape.kv_pages = kv.n_pages;
      shape.page_size = kv.page_size;
      if (!greedy && T > 1) {
        // Logits of the last row of every sequence (what prefill asks for), plus a padded row.
        const int32_t* seq = data.inputs[1].tensor.data_as<int32_t>();
        std::vector<int32_t> rows;
        for (int64_t t = 0; t < T; ++t) {
          if (seq[t] >= 0 && (t + 1 == T || seq[t + 1] != seq[t]))
            rows.push_back(static_cast<int32_t>(t));
        }
        rows.push_back(-1);
        Tensor r = Tensor::empty(DType::I32, {static_cast<int64_t>(rows.size())});
        std::copy(rows.begin(), rows.end(), r.data_as<int32_t>());
        data.inputs.push_back({model::input_names::kLogitRows, r});
        shape.logit_rows = static_cast<int64_t>(rows.size());
      }
      const Graph traced = model::build_forward(c, lookup, shape, "decode");
      Graph optimized = traced;
      PipelineOptions options;
      options.verify_each = true;
      run_pipeline(optimized, options);
      ASSERT_NO_THROW(verify(optimized));

      // Structure: fewer nodes, nothing fusable left, the model-specific fusions present.
      EXPECT_LT(optimized.num_nodes(), traced.num_nodes());
      const auto before = testing::unfused_patterns(traced);
      const auto after = testing::unfused_patterns(optimized);
      EXPECT_TRUE(after.empty()) << ::testing::PrintToString(after) << "\n" << print(optimized);
      EXPECT_FALSE(before.empty());
      EXPECT_EQ(count_op(optimized, Op::QkNormRopeKvWrite), c.qk_norm ? c.n_layers : 0)
          << print(optimized);
      EXPECT_EQ(count_op(optimized, Op::NormMatmulArgmax), greedy ? 1 : 0);
      // Per layer: gate/up, and Q/K/V (or Q/K where V's dtype differs).
      EXPECT_EQ(count_op(optimized, Op::MatmulSplit), 2 * c.n_layers);

      testing::RandomWeights weights(52);
      weights.declare(traced);
      const testing::RunResult want = testing::run_interpreted(traced, data, weights, pool);
      EXPECT_TRUE(
          testing::same_bits(want, testing::run_interpreted(optimized, data, weights, pool)))
          << "optimized, eager";
      EXPECT_TRUE(testing::same_bits(want, testing::run_planned(optimized, data, weights, pool)))
          << "optimized, plan";
      Graph replay_only = traced;  // --graph-mode=replay: no rewrites, in-place aliasing only
      PipelineOptions annotate;
      annotate.rewrites = false;
      run_pipeline(replay_only, annotate);
      EXPECT_TRUE(testing::same_bits(want, testing::run_planned(replay_only, data, weights, pool)))
          << "traced, plan";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Models, PipelineNumeric,
    ::testing::Values(Case{Arch::Gemma3, DType::F16}, Case{Arch::Gemma3, DType::Q8_0},
                      Case{Arch::Gemma3, DType::Q4_K}, Case{Arch::Llama, DType::BF16},
                      Case{Arch::Llama, DType::Q4_0}, Case{Arch::Llama, DType::Q6_K},
                      Case{Arch::Qwen2, DType::F32}, Case{Arch::Qwen2, DType::Q5_0},
                      Case{Arch::Qwen3, DType::Q5_K}, Case{Arch::Qwen3, DType::F16}),
    case_name);

}  // namespace
}  // namespace kiln::graph
