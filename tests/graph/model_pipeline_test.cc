// The optimizing pipeline on the tiny GGUF models of the fixtures (real tensor names, real
// mixed quantizations, real configs read from the files): it must shrink the graph, keep the
// verifier happy after every pass, leave no pattern a fusion pass promises to remove, and
// compute bit for bit what the traced graph computes (eager unfused vs captured optimized
// plan, logits and the KV pool).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>

#include "graph/fusion_patterns.h"
#include "graph/numeric_runs.h"
#include "kiln/graph/passes/pipeline.h"
#include "kiln/graph/printer.h"
#include "kiln/model/fused_tensors.h"
#include "kiln/model/gguf.h"
#include "kiln/model/mla_tensors.h"
#include "kiln/model/model_config.h"
#include "kiln/model/transformer.h"
#include "kiln/model/weight_store.h"
#include "tiny_models.h"

namespace kiln::graph {
namespace {

namespace fs = std::filesystem;

using kiln::testing::tiny_model;

int count_op(const Graph& g, Op op) {
  int n = 0;
  for (const Node& node : g.nodes()) n += node.op == op;
  return n;
}

class ModelPipeline : public ::testing::TestWithParam<std::string> {};

// The fixtures' tiny models, and the Q8_0 conversions of the oracle cases (tests/oracle) of
// the architectures the fixtures do not carry, named "oracle-<case>".
fs::path model_path(const std::string& name) {
  const std::string oracle = "oracle-";
  if (name.rfind(oracle, 0) != 0) return tiny_model(name);
  return fs::path(KILN_SOURCE_DIR) / "tests" / "oracle" / "data" / name.substr(oracle.size()) /
         "model.q8_0.gguf";
}

TEST_P(ModelPipeline, FusesEverythingAndComputesTheSameBits) {
  const fs::path path = model_path(GetParam());
  ASSERT_TRUE(fs::exists(path)) << "fixture missing (tests/fixtures/generate_all.py): " << path;
  auto file = model::GgufFile::open(path.string());
  const model::ModelConfig c = model::read_model_config(*file);
  // DeepSeek's latent attention reads weights rearranged at load (model/mla_tensors.h); Falcon's
  // Q, K and V are row ranges of its attn_qkv (model/fused_tensors.h).
  model::WeightStore store(model::with_mla_tensors(model::gguf_tensor_source(file), c),
                           model::fused_tensor_slices(c));

  KvGeometry kv;
  kv.n_layers = c.n_layers;
  kv.n_pages = 16;
  kv.page_size = 16;
  kv.n_kv_heads = c.n_kv_heads;
  kv.head_dim = c.head_dim;
  ThreadPool pool(2);
  for (int64_t T : {3, 8}) {
    const bool greedy = T == 3;  // decode with the greedy head; a padded logits batch
    SCOPED_TRACE(::testing::Message() << "T=" << T);
    testing::StepData data = testing::paged_step(T, kv, 60 + T, /*inert_last_row=*/T == 8);
    std::mt19937 rng(61);
    Tensor ids = Tensor::empty(DType::I32, {T});
    for (int64_t i = 0; i < T; ++i)
      ids.data_as<int32_t>()[i] = static_cast<int32_t>(3 + rng() % (c.vocab - 3));
    data.inputs.push_back({model::input_names::kTokenIds, ids});
    model::ForwardShape shape;
    shape.tokens = T;
    shape.seqs = data.inputs[3].tensor.shape()[0];  // block_table rows
    shape.max_pages_per_seq = data.inputs[3].tensor.shape()[1];
    shape.greedy = greedy;
    shape.kv_pages = kv.n_pages;
    shape.page_size = kv.page_size;

    const Graph traced = model::build_forward(c, store.lookup(), shape, "decode");
    Graph optimized = traced;
    PipelineOptions options;
    options.verify_each = true;  // also in release builds: the verifier after every pass
    const auto stats = run_pipeline(optimized, options);
    ASSERT_EQ(stats.size(), pipeline_passes().size());

    // Fewer nodes; every fusion the model offers happened; nothing fusable is left.
    EXPECT_LT(optimized.num_nodes(), traced.num_nodes()) << format_pass_stats(stats);
    std::printf("%s T=%lld: %d nodes traced, %d optimized\n", GetParam().c_str(),
                static_cast<long long>(T), traced.num_nodes(), optimized.num_nodes());
    const auto before = testing::unfused_patterns(traced);
    const auto after = testing::unfused_patterns(optimized);
    EXPECT_FALSE(before.empty());
    EXPECT_TRUE(after.empty()) << ::testing::PrintToString(after) << "\n" << print(optimized);
    EXPECT_EQ(count_op(optimized, Op::QkNormRopeKvWrite), c.qk_norm ? c.n_layers : 0)
        << print(optimized);
    EXPECT_EQ(count_op(optimized, Op::KvWrite), c.qk_norm ? 0 : c.n_layers);
    // The LM-head fusion reads an RMSNorm; a LayerNorm model's head stays matmul + argmax.
    EXPECT_EQ(count_op(optimized, Op::NormMatmulArgmax), greedy && !c.layer_norm ? 1 : 0);
    // Projections merge only within one weight dtype, and these files mix types the way
    // llama.cpp's quantization mixes do; unfused_patterns (above) checks no same-dtype pair of
    // projections of one activation is left.
    EXPECT_EQ(count_op(optimized, Op::Reshape), 0);
    const bool gelu = c.activation == model::Activation::GeluTanh;
    // A mixture-of-experts FFN applies its activation inside the moe_ffn op; DeepSeek's leading
    // dense layers and its shared experts have their own.
    const int moe_layers = c.n_experts > 0 ? c.n_layers - c.n_dense_lead : 0;
    const int dense_ffns = c.n_layers - moe_layers + (c.n_ff_shared > 0 ? moe_layers : 0);
    // An FFN without a gate has no activation * up to fuse.
    EXPECT_EQ(count_op(optimized, gelu ? Op::GeluMul : Op::SiluMul), c.gated_ffn ? dense_ffns : 0);
    EXPECT_EQ(count_op(optimized, Op::MoeFfn), moe_layers);

    const testing::RunResult want = testing::run_interpreted(traced, data, store, pool);
    EXPECT_TRUE(testing::same_bits(want, testing::run_planned(optimized, data, store, pool)))
        << "optimized, plan";
    EXPECT_TRUE(testing::same_bits(want, testing::run_interpreted(optimized, data, store, pool)))
        << "optimized, eager";
  }
}

INSTANTIATE_TEST_SUITE_P(Tiny, ModelPipeline, ::testing::ValuesIn(kiln::testing::kTinyModels),
                         kiln::testing::model_param_name);
INSTANTIATE_TEST_SUITE_P(Oracle, ModelPipeline,
                         ::testing::Values("oracle-mixtral", "oracle-deepseek-v2",
                                           "oracle-deepseek-v3", "oracle-granite", "oracle-olmo2",
                                           "oracle-gpt-oss", "oracle-starcoder2",
                                           "oracle-command-r", "oracle-falcon-7b",
                                           "oracle-falcon-40b"),
                         kiln::testing::model_param_name);

}  // namespace
}  // namespace kiln::graph
