#include "kiln/graph/passes/inplace.h"

#include "ir/ir_test_util.h"

namespace kiln::graph {
namespace {

using testing::expect_rewrite;
using testing::expect_unchanged;

TEST(Inplace, AnnotatesDyingIntermediatesOnly) {
  auto r = expect_rewrite(run_inplace, R"IR(graph g() {
  %x = input "x" : f32[2,8]
  %w = param "w" : f32[8]
  %0 = scale(%x) {factor=2.0} : f32[2,8]
  %1 = rms_norm(%0, %w) {eps=1e-06} : f32[2,8]
  %2 = gelu(%1) : f32[2,8]
  %3 = add(%2, %1) : f32[2,8]
  %4 = reshape(%3) {shape=[16]} : f32[16]
  %5 = silu(%4) : f32[16]
  %6 = mul(%5, %5) : f32[16]
  %7 = scale(%6) {factor=3.0} : f32[16]
  return %7, %2
})IR",
                          // %0: input is a graph input. %1: rms_norm(%0) where %0 dies: yes.
                          // %2: %1 has another use (%3). %3: %2 is a graph output.
                          // %4: reshape of dying %3: yes. %5: yes. %6: %5 used twice by it.
                          // %7: its output is a graph output.
                          R"IR(graph g() {
  %x = input "x" : f32[2,8]
  %w = param "w" : f32[8]
  %0 = scale(%x) {factor=2.0} : f32[2,8]
  %1 = rms_norm(%0, %w) {eps=1e-06, inplace=1} : f32[2,8]
  %2 = gelu(%1) : f32[2,8]
  %3 = add(%2, %1) : f32[2,8]
  %4 = reshape(%3) {shape=[16], inplace=1} : f32[16]
  %5 = silu(%4) {inplace=1} : f32[16]
  %6 = mul(%5, %5) : f32[16]
  %7 = scale(%6) {factor=3.0} : f32[16]
  return %7, %2
})IR");
  EXPECT_EQ(r.counter("outputs_aliased"), 3);
}

TEST(Inplace, NeverAliasesSourcesOrNonCapableOps) {
  expect_unchanged(run_inplace, R"IR(graph g() {
  %x = input "x" : f32[2,8]
  %w = param "w" : q8_0[4,32]
  %0 = gelu(%x) : f32[2,8]
  %1 = cast(%0) {dtype="f16"} : f16[2,8]
  %2 = reshape(%w) {shape=[2,64]} : q8_0[2,64]
  return %1, %2
})IR");
}

TEST(Inplace, IsIdempotentAndDropsStaleAnnotations) {
  // A stale annotation (the output is a graph output) is removed; rerunning changes nothing.
  Graph g = parse(R"IR(graph g() {
  %x = input "x" : f32[2,8]
  %0 = gelu(%x) : f32[2,8]
  %1 = silu(%0) {inplace=1} : f32[2,8]
  return %1, %0
})IR");
  EXPECT_TRUE(run_inplace(g, {}).changed);
  EXPECT_FALSE(g.node(2).attrs.has("inplace"));
  EXPECT_FALSE(run_inplace(g, {}).changed);
}

}  // namespace
}  // namespace kiln::graph
