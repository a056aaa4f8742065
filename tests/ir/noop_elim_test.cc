#include "kiln/graph/passes/noop_elim.h"

#include "ir/ir_test_util.h"

namespace kiln::graph {
namespace {

using testing::expect_rewrite;
using testing::expect_unchanged;

TEST(NoopElim, RemovesIdentities) {
  auto r = expect_rewrite(run_noop_elim, R"IR(graph g() {
  %x = input "x" : f32[2,8]
  %0 = reshape(%x) {shape=[2,8]} : f32[2,8]
  %1 = copy(%0) : f32[2,8]
  %2 = cast(%1) {dtype="f32"} : f32[2,8]
  %3 = scale(%2) {factor=1.0} : f32[2,8]
  %4 = scale(%3) {factor=2.0} : f32[2,8]
  return %4
})IR",
                          R"IR(graph g() {
  %x = input "x" : f32[2,8]
  %4 = scale(%x) {factor=2.0} : f32[2,8]
  return %4
})IR");
  EXPECT_EQ(r.counter("noops_removed"), 4);
  EXPECT_EQ(r.counter("nodes_removed"), 4);
}

TEST(NoopElim, ShortensReshapeChainsAndDropsOnesThatEndWhereTheyStarted) {
  expect_rewrite(run_noop_elim, R"IR(graph g() {
  %x = input "x" : f32[2,8]
  %0 = reshape(%x) {shape=[16]} : f32[16]
  %1 = reshape(%0) {shape=[4,4]} : f32[4,4]
  %2 = reshape(%1) {shape=[2,2,4]} : f32[2,2,4]
  %3 = reshape(%2) {shape=[2,8]} : f32[2,8]
  return %2, %3
})IR",
                 R"IR(graph g() {
  %x = input "x" : f32[2,8]
  %2 = reshape(%x) {shape=[2,2,4]} : f32[2,2,4]
  return %2, %x
})IR");
}

TEST(NoopElim, KeepsAReshapeWhoseInputHasOtherUses) {
  expect_rewrite(run_noop_elim, R"IR(graph g() {
  %x = input "x" : f32[2,8]
  %0 = reshape(%x) {shape=[16]} : f32[16]
  %1 = reshape(%0) {shape=[4,4]} : f32[4,4]
  return %0, %1
})IR",
                 R"IR(graph g() {
  %x = input "x" : f32[2,8]
  %0 = reshape(%x) {shape=[16]} : f32[16]
  %1 = reshape(%x) {shape=[4,4]} : f32[4,4]
  return %0, %1
})IR");
}

TEST(NoopElim, NoChange) {
  expect_unchanged(run_noop_elim, R"IR(graph g() {
  %x = input "x" : f32[2,8]
  %0 = reshape(%x) {shape=[16]} : f32[16]
  %1 = cast(%x) {dtype="f16"} : f16[2,8]
  %2 = scale(%x) {factor=-1.0} : f32[2,8]
  return %0, %1, %2
})IR");
}

}  // namespace
}  // namespace kiln::graph
