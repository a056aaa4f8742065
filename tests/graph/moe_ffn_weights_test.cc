// moe_ffn over a real GGUF file: the tiny qwen3moe fixture's 3-D expert tensors, as the model's
// WeightStore reads and packs them (one PackedWeight per expert, gate and up stacked), run in
// both execution modes.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include "graph/numeric_runs.h"
#include "kiln/base/error.h"
#include "kiln/graph/builder.h"
#include "kiln/kernels/dequant.h"
#include "kiln/model/gguf.h"
#include "kiln/model/weight_store.h"
#include "tiny_models.h"

namespace kiln::graph {
namespace {

namespace fs = std::filesystem;

struct MoeLayer {
  Graph graph;
  std::vector<int> params;  // router, gate_exps, up_exps, down_exps nodes of layer 0
};

// The FFN half of both layers of the file, on a T-row input.
MoeLayer moe_layers(model::WeightStore& store, int64_t T) {
  Builder b("moe");
  auto param = [&](const std::string& name) {
    const auto meta = store.meta(name);
    KILN_CHECK(meta.has_value(), "no tensor {}", name);
    return b.param(name, meta->dtype, meta->shape);
  };
  MoeLayer out;
  Value x = b.input("x", DType::F32, {T, 256});
  for (int il = 0; il < 2; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    Value h = b.rms_norm(x, param(p + "ffn_norm.weight"), 1e-6);
    Value router = param(p + "ffn_gate_inp.weight");
    Value gate = param(p + "ffn_gate_exps.weight");
    Value up = param(p + "ffn_up_exps.weight");
    Value down = param(p + "ffn_down_exps.weight");
    if (il == 0) out.params = {router.node, gate.node, up.node, down.node};
    x = b.add(x, b.moe_ffn(h, router, gate, up, down, 2, true));
  }
  b.output(x);
  out.graph = b.finish();
  return out;
}

class MoeFfnWeights : public ::testing::Test {
 protected:
  void SetUp() override {
    const fs::path path = kiln::testing::tiny_model("tiny-qwen3moe");
    ASSERT_TRUE(fs::exists(path)) << "fixture missing (tests/fixtures/generate_all.py): " << path;
    file_ = model::GgufFile::open(path.string());
  }
  std::shared_ptr<model::GgufFile> file_;
};

// GGUF's fastest-first [D, F, E] is kiln's [E, F, D]; expert e's packed rows are its gate rows,
// then its up rows, each equal to the file's row dequantized.
TEST_F(MoeFfnWeights, ExpertsArePackedFromTheirSlicesOfThe3dTensors) {
  model::WeightStore store(file_);
  ASSERT_EQ(store.meta("blk.0.ffn_gate_exps.weight")->shape, (Shape{8, 64, 256}));
  ASSERT_EQ(store.meta("blk.0.ffn_down_exps.weight")->shape, (Shape{8, 256, 64}));
  const MoeLayer l = moe_layers(store, 1);
  const Node& gate = l.graph.node(l.params[1]);
  const Node& up = l.graph.node(l.params[2]);
  const Node& down = l.graph.node(l.params[3]);
  const kernels::PackedExperts& gu = store.packed_experts({&gate, &up});
  const kernels::PackedExperts& dn = store.packed_experts({&down});
  ASSERT_EQ(gu.experts.size(), 8u);
  ASSERT_EQ(dn.experts.size(), 8u);
  EXPECT_EQ(&gu, &store.packed_experts({&gate, &up}));  // packed once
  const Tensor g = file_->tensor("blk.0.ffn_gate_exps.weight");
  const Tensor u = file_->tensor("blk.0.ffn_up_exps.weight");
  const Tensor d = file_->tensor("blk.0.ffn_down_exps.weight");
  std::vector<float> got(256), want(256);
  auto file_row = [&](const Tensor& t, int64_t e, int64_t r) {
    const int64_t n = t.shape()[1], k = t.shape()[2];
    const auto* base = static_cast<const uint8_t*>(t.data());
    kernels::dequantize_row(t.dtype(), base + (e * n + r) * t.row_bytes(), want.data(), k);
    return k;
  };
  for (int64_t e : {0, 3, 7}) {
    EXPECT_EQ(gu.experts[e].n(), 128);
    EXPECT_EQ(gu.experts[e].k(), 256);
    EXPECT_EQ(dn.experts[e].n(), 256);
    EXPECT_EQ(dn.experts[e].k(), 64);
    for (int64_t r : {0, 5, 63}) {
      int64_t k = file_row(g, e, r);
      gu.experts[e].dequantize_row(r, got.data());
      EXPECT_TRUE(std::equal(got.begin(), got.begin() + k, want.begin())) << e << " gate " << r;
      k = file_row(u, e, r);
      gu.experts[e].dequantize_row(64 + r, got.data());
      EXPECT_TRUE(std::equal(got.begin(), got.begin() + k, want.begin())) << e << " up " << r;
      k = file_row(d, e, 4 * r);
      dn.experts[e].dequantize_row(4 * r, got.data());
      EXPECT_TRUE(std::equal(got.begin(), got.begin() + k, want.begin())) << e << " down " << r;
    }
  }
}

TEST_F(MoeFfnWeights, EagerAndPlanAgreeOnTheFixtureWeights) {
  model::WeightStore store(file_);
  ThreadPool pool(2);
  for (int64_t T : {1, 5}) {
    const MoeLayer l = moe_layers(store, T);
    store.prepack(l.graph);
    testing::StepData data;
    data.inputs.push_back(testing::random_input("x", {T, 256}, 90 + T));
    const testing::RunResult eager = testing::run_interpreted(l.graph, data, store, pool);
    EXPECT_TRUE(testing::same_bits(eager, testing::run_planned(l.graph, data, store, pool)))
        << "T=" << T;
  }
}

}  // namespace
}  // namespace kiln::graph
