#include "kiln/graph/memory_planner.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>

#include "graph/test_graphs.h"
#include "kiln/graph/lowering.h"
#include "kiln/graph/passes/inplace.h"
#include "kiln/graph/passes/pipeline.h"

namespace kiln::graph {
namespace {

// Checks the planner's guarantees from first principles (own liveness, own alias groups).
void check_guarantees(const Graph& g, const MemoryPlan& plan) {
  const int n = g.num_nodes();
  std::vector<std::vector<bool>> is_output(n);
  for (int i = 0; i < n; ++i) is_output[i].assign(g.node(i).outputs.size(), false);
  for (const Value& v : g.outputs()) is_output[v.node][v.index] = true;

  // Exactly the intermediates are planned.
  for (int i = 0; i < n; ++i) {
    const Node& node = g.node(i);
    for (int k = 0; k < static_cast<int>(node.outputs.size()); ++k) {
      const bool intermediate =
          !node.is_source() && !is_output[i][k] && node.outputs[k].dtype != DType::Token;
      EXPECT_EQ(plan.find(Value{i, k}) != nullptr, intermediate) << "node " << i << " output " << k;
    }
  }
  // Liveness and alias groups, computed independently.
  std::vector<int> first(plan.buffers.size()), last(plan.buffers.size()),
      group(plan.buffers.size());
  auto pos = [&](Value v) { return static_cast<int>(plan.find(v) - plan.buffers.data()); };
  for (size_t b = 0; b < plan.buffers.size(); ++b) {
    first[b] = last[b] = plan.buffers[b].value.node;
    group[b] = static_cast<int>(b);
  }
  for (int i = 0; i < n; ++i) {
    const Node& node = g.node(i);
    for (const Value& in : node.inputs) {
      if (plan.find(in)) last[pos(in)] = std::max(last[pos(in)], i);
    }
    if ((is_inplace(node) || output_is_view(node)) && plan.find(Value{i, 0}) &&
        plan.find(node.inputs[0])) {
      group[pos(Value{i, 0})] = group[pos(node.inputs[0])];
      EXPECT_EQ(plan.find(Value{i, 0})->offset, plan.find(node.inputs[0])->offset)
          << "alias at node " << i;
    }
  }
  size_t sum = 0;
  for (size_t a = 0; a < plan.buffers.size(); ++a) {
    const PlannedBuffer& x = plan.buffers[a];
    sum += x.size;
    EXPECT_EQ(x.offset % 64, 0u);
    EXPECT_EQ(x.size % 64, 0u);
    EXPECT_GE(x.size, dense_byte_size(g.type(x.value)));
    EXPECT_LE(x.offset + x.size, plan.arena_bytes);
    for (size_t b = a + 1; b < plan.buffers.size(); ++b) {
      if (group[a] == group[b]) continue;
      const PlannedBuffer& y = plan.buffers[b];
      const bool live_together = first[a] <= last[b] && first[b] <= last[a];
      const bool disjoint = x.offset + x.size <= y.offset || y.offset + y.size <= x.offset;
      EXPECT_TRUE(!live_together || disjoint) << "buffers of %" << x.value.node << " and %"
                                              << y.value.node << " overlap while both live";
    }
  }
  EXPECT_EQ(sum, plan.planned_bytes);
}

// A random DAG of elementwise ops, matmuls and reshapes over a few widths.
Graph random_graph(std::mt19937& rng) {
  Builder b("random");
  const int64_t rows = 1 + rng() % 4;
  const int64_t widths[] = {8, 24, 64};
  std::vector<Value> values;
  for (int64_t w : widths) values.push_back(b.input(fmt::format("x{}", w), DType::F32, {rows, w}));
  const int steps = 10 + rng() % 40;
  for (int s = 0; s < steps; ++s) {
    const Value a = values[rng() % values.size()];
    const Shape sa = b.type(a).shape;
    switch (rng() % 6) {
      case 0:
        values.push_back(b.gelu(a));
        break;
      case 1:
        values.push_back(b.scale(a, 0.5));
        break;
      case 2: {
        const int64_t n = widths[rng() % 3];
        values.push_back(b.matmul(a, b.param(fmt::format("w{}", s), DType::F32, {n, sa[1]})));
        break;
      }
      case 3:
        values.push_back(b.reshape(b.reshape(a, {sa[0] * sa[1]}), sa));
        break;
      default: {
        std::vector<Value> same;
        for (Value v : values) {
          if (b.type(v).shape == sa) same.push_back(v);
        }
        values.push_back(b.add(a, same[rng() % same.size()]));
      }
    }
  }
  b.output(values.back());
  for (int k = 0; k < 2; ++k) b.output(values[rng() % values.size()]);
  return b.finish();
}

TEST(MemoryPlanner, RandomGraphsKeepLiveBuffersApart) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 200; ++trial) {
    Graph g = random_graph(rng);
    if (trial % 2) run_inplace(g, {});
    const MemoryPlan plan = plan_memory(g);
    check_guarantees(g, plan);
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "trial " << trial;
      return;
    }
  }
}

TEST(MemoryPlanner, TransformerGraphReusesMemory) {
  for (bool optimize : {false, true}) {
    testing::ToyConfig c;
    c.layers = 4;
    Graph g = testing::build_toy_decoder(c);
    PipelineOptions options;
    options.rewrites = optimize;
    run_pipeline(g, options);
    const MemoryPlan plan = plan_memory(g);
    check_guarantees(g, plan);
    // Each layer's activations die within the layer, so 4 layers fit in far less than the sum.
    EXPECT_GT(plan.reuse_ratio(), 3.0) << plan.describe();
  }
}

TEST(MemoryPlanner, InPlaceChainSharesOneSlot) {
  Builder b("chain");
  Value x = b.input("x", DType::F32, {2, 16});
  Value a = b.gelu(x);
  Value c = b.silu(b.scale(a, 2.0));
  b.output(b.gelu(b.add(c, x)));
  Graph g = b.finish();
  run_inplace(g, {});
  const MemoryPlan plan = plan_memory(g);
  check_guarantees(g, plan);
  // gelu, scale, silu, add: add's input 0 (silu) dies there, so all four share one 128-byte slot.
  EXPECT_EQ(plan.buffers.size(), 4u);
  EXPECT_EQ(plan.arena_bytes, 128u);
}

TEST(MemoryPlanner, SizesComeFromTheCallbackAndAreAligned) {
  Builder b("g");
  Value x = b.input("x", DType::F32, {1, 3});
  b.output(b.gelu(b.gelu(x)));
  Graph g = b.finish();
  const MemoryPlan plan = plan_memory(g, [](const ValueType&) { return size_t{100}; });
  ASSERT_EQ(plan.buffers.size(), 1u);
  EXPECT_EQ(plan.buffers[0].size, 128u);
}

}  // namespace
}  // namespace kiln::graph
