// Lowering fills each step's typed argument struct (step_args.h) from the node: the family
// the kernel reads, and every field from the right attribute or shape. The numeric tests
// check the kernels' results; these name the fields, so that a swapped size or a flag read
// from the wrong attribute (neox from n_rot, say) fails here by name.
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <type_traits>
#include <vector>

#include "graph/random_weights.h"
#include "kiln/graph/builder.h"
#include "kiln/graph/lowering.h"

namespace kiln::graph {
namespace {

// Lowers node `index` of `g` with placeholder buffer addresses (nothing runs).
Lowered lower(const Graph& g, testing::RandomWeights& weights, int index) {
  static std::vector<char> dummy(1 << 16);
  LowerContext ctx;
  ctx.graph = &g;
  ctx.weights = &weights;
  ctx.n_threads = 2;
  ctx.buffer = [](Value) -> void* { return dummy.data(); };
  return lower_node(ctx, index);
}

// The first node of each op in `g`.
std::map<Op, int> first_of_each_op(const Graph& g) {
  std::map<Op, int> found;
  for (int i = 0; i < g.num_nodes(); ++i) found.try_emplace(g.node(i).op, i);
  return found;
}

TEST(StepArgs, StepsStayPlainData) {
  static_assert(std::is_trivially_copyable_v<Step>);
  static_assert(StepArgs::kind_of<RopeArgs>() != StepArgs::kind_of<NormArgs>());
  // The typed union is no larger than the positional arrays it replaced (8 sizes, 4 floats).
  EXPECT_LE(sizeof(StepArgs), 8 * sizeof(int64_t) + 4 * sizeof(float));
}

TEST(StepArgs, ElementwiseNormAndRopeFieldsComeFromTheNode) {
  const int64_t T = 3, heads = 4, head_dim = 8, D = heads * head_dim;
  Builder b("args");
  Value x = b.input("x", DType::F32, {T, D});
  Value pos = b.input("pos", DType::I32, {T});
  Value bias = b.param("bias", DType::F32, {D});
  Value w = b.param("norm", DType::F32, {D});
  Value y = b.add(x, bias);
  y = b.scale(y, 0.25);
  y = b.softcap(y, 30.0);
  y = b.rms_norm(y, w, 1e-5);
  y = b.rope(y, pos, static_cast<int>(head_dim), 10000.0, /*neox=*/true, std::nullopt, /*n_rot=*/4);
  b.output(b.argmax(y));
  Graph g = b.finish();
  testing::RandomWeights weights(1);
  weights.declare(g);
  const auto at = first_of_each_op(g);

  const Lowered add = lower(g, weights, at.at(Op::Add));
  ASSERT_TRUE(add.step.args.holds<BinaryArgs>());
  EXPECT_EQ(add.step.args.get<BinaryArgs>().rows, T);
  EXPECT_EQ(add.step.args.get<BinaryArgs>().cols, D);
  EXPECT_TRUE(add.step.args.get<BinaryArgs>().row_broadcast);  // a bias

  const Lowered scale = lower(g, weights, at.at(Op::Scale));
  ASSERT_TRUE(scale.step.args.holds<ScaleArgs>());
  EXPECT_EQ(scale.step.args.get<ScaleArgs>().count, T * D);
  EXPECT_EQ(scale.step.args.get<ScaleArgs>().factor, 0.25f);

  const Lowered cap = lower(g, weights, at.at(Op::Softcap));
  ASSERT_TRUE(cap.step.args.holds<SoftcapArgs>());
  EXPECT_EQ(cap.step.args.get<SoftcapArgs>().cap, 30.0f);

  const Lowered norm = lower(g, weights, at.at(Op::RmsNorm));
  ASSERT_TRUE(norm.step.args.holds<NormArgs>());
  EXPECT_EQ(norm.step.args.get<NormArgs>().rows, T);
  EXPECT_EQ(norm.step.args.get<NormArgs>().cols, D);
  EXPECT_EQ(norm.step.args.get<NormArgs>().eps, 1e-5f);

  const Lowered rope = lower(g, weights, at.at(Op::Rope));
  ASSERT_TRUE(rope.step.args.holds<RopeArgs>());
  const RopeArgs& r = rope.step.args.get<RopeArgs>();
  EXPECT_EQ(r.rows, T);
  EXPECT_EQ(r.n_heads, heads);
  EXPECT_EQ(r.head_dim, head_dim);
  EXPECT_EQ(r.n_rot, 4);
  EXPECT_TRUE(r.neox);

  const Lowered argmax = lower(g, weights, at.at(Op::Argmax));
  ASSERT_TRUE(argmax.step.args.holds<ArgmaxArgs>());
  EXPECT_EQ(argmax.step.args.get<ArgmaxArgs>().rows, T);
  EXPECT_EQ(argmax.step.args.get<ArgmaxArgs>().cols, D);
}

TEST(StepArgs, NeoxOffAndFullRotary) {
  Builder b("gptj");
  Value x = b.input("x", DType::F32, {2, 16});
  Value pos = b.input("pos", DType::I32, {2});
  b.output(b.rope(x, pos, 8, 10000.0, /*neox=*/false));
  Graph g = b.finish();
  testing::RandomWeights weights(1);
  const Lowered rope = lower(g, weights, first_of_each_op(g).at(Op::Rope));
  const RopeArgs& r = rope.step.args.get<RopeArgs>();
  EXPECT_FALSE(r.neox);
  EXPECT_EQ(r.n_rot, 8);  // the attribute is absent: all of head_dim
  EXPECT_EQ(r.n_heads, 2);
}

TEST(StepArgs, EmbeddingAndMatmul) {
  const int64_t vocab = 40, D = 32, T = 3, N = 24;
  Builder b("gemm");
  Value ids = b.input("ids", DType::I32, {T});
  Value table = b.param("table", DType::F32, {vocab, D});
  Value w = b.param("w", DType::F32, {N, D});
  b.output(b.matmul(b.embedding(table, ids), w));
  Graph g = b.finish();
  testing::RandomWeights weights(1);
  weights.declare(g);
  const auto at = first_of_each_op(g);

  const Lowered emb = lower(g, weights, at.at(Op::Embedding));
  ASSERT_TRUE(emb.step.args.holds<EmbeddingArgs>());
  const EmbeddingArgs& e = emb.step.args.get<EmbeddingArgs>();
  EXPECT_EQ(e.vocab, vocab);
  EXPECT_EQ(e.dim, D);
  EXPECT_EQ(e.tokens, T);
  EXPECT_EQ(e.table_dtype, DType::F32);

  const Lowered mm = lower(g, weights, at.at(Op::Matmul));
  ASSERT_TRUE(mm.step.args.holds<MatmulArgs>());
  EXPECT_EQ(mm.step.args.get<MatmulArgs>().rows, T);
}

}  // namespace
}  // namespace kiln::graph
