#include <gtest/gtest.h>

#include "graph/test_graphs.h"
#include "kiln/base/error.h"
#include "kiln/graph/parser.h"

namespace kiln::graph {
namespace {

void expect_invalid(const Graph& g, const std::string& needle) {
  try {
    verify(g);
    FAIL() << "verified";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

Graph two_layer() {
  testing::ToyConfig c;
  return testing::build_toy_decoder(c);
}

TEST(Verifier, AcceptsBuiltGraphs) { EXPECT_NO_THROW(verify(two_layer())); }

TEST(Verifier, RejectsUseBeforeDefinition) {
  Graph g = two_layer();
  const int last = g.num_nodes() - 1;
  g.node(9).inputs[0] = Value{last, 0};
  expect_invalid(g, "which is not defined before it");
}

TEST(Verifier, RejectsStaleDeclaredType) {
  Graph g = two_layer();
  g.node(g.num_nodes() - 1).outputs[0].shape = Shape{3};
  expect_invalid(g, "output 0 is declared i32[3], inferred i32[2]");
}

// A state, two writes of it and a read between them: every effect-token rule holds.
constexpr const char* kTokenGraph = R"(graph g() {
  %kv = state "kv" : f16[4,8]
  %k = input "k" : f32[1,8]
  %s = input "s" : i32[1]
  %bt = input "bt" : i32[1,2]
  %sl = input "sl" : i32[1]
  %t0 = kv_write(%kv, %k, %k, %s) {layer=0} : token[]
  %a = attention(%k, %t0, %bt, %sl, %s, %s) {layer=0, n_heads=1, n_kv_heads=1, head_dim=8, window=0, scale=1.0} : f32[1,8]
  %t1 = kv_write(%t0, %k, %k, %s) {layer=1} : token[]
  return %a, %t1
})";

TEST(Verifier, RejectsForkedTokenChainAndReadAfterMutation) {
  Graph ok = parse(kTokenGraph);
  // Move the attention after the next write of the same state: it would read layer 1's write.
  Graph bad = ok;
  std::swap(bad.node(6), bad.node(7));
  bad.outputs() = {Value{7, 0}, Value{6, 0}};
  expect_invalid(bad, "after node 6 has mutated that state");
  // sort_topologically restores the reader-before-writer order.
  bad.sort_topologically();
  EXPECT_NO_THROW(verify(bad));
  EXPECT_EQ(bad.node(6).op, Op::Attention);

  Graph fork = ok;
  fork.node(7).inputs[0] = Value{0, 0};  // layer 1 writes %kv again, not after %t0
  expect_invalid(fork, "already consumed by mutating node 5");
}

TEST(Verifier, RejectsTokensOutsideStateInputs) {
  const Graph ok = parse(kTokenGraph);
  ASSERT_NO_THROW(verify(ok));
  // A token may only be made by a mutation, never be a source.
  Graph source = ok;
  source.node(0).outputs[0] = ValueType{DType::Token, Shape{}};
  expect_invalid(source, "a source cannot be an effect token");
  // A token flows into the state input of an op that touches state, nowhere else: here into the
  // key rows of the second write (every op's type rule refuses it before the verifier's own).
  Graph elsewhere = ok;
  elsewhere.node(7).inputs[1] = Value{5, 0};
  expect_invalid(elsewhere, "node 7 (kv_write): kv_write: k (input 1) must be f32, got token[]");
  // The state input of such an op is the state itself or a token of it, not any tensor.
  Graph not_state = ok;
  not_state.node(5).inputs[0] = Value{1, 0};
  expect_invalid(not_state, "kv input must be a state or an effect token, got input output");
}

TEST(Verifier, RejectsMissingOutputs) {
  Graph g = two_layer();
  g.outputs().push_back(Value{g.num_nodes(), 0});
  expect_invalid(g, "does not exist");
}

}  // namespace
}  // namespace kiln::graph
