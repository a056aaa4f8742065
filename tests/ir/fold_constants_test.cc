#include "kiln/graph/passes/fold_constants.h"

#include "ir/ir_test_util.h"

namespace kiln::graph {
namespace {

using testing::expect_rewrite;
using testing::expect_unchanged;

TEST(FoldConstants, PureOpsOverParamsBecomeDerivedParams) {
  auto r = expect_rewrite(run_fold_constants, R"IR(graph g() {
  %x = input "x" : f32[2,8]
  %w = param "w" : f32[8]
  %b = param "b" : f32[8]
  %wr = reshape(%w) {shape=[2,4]} : f32[2,4]
  %wr2 = reshape(%w) {shape=[4,2]} : f32[4,2]
  %sum = add(%w, %b) : f32[8]
  %y = add(%x, %sum) : f32[2,8]
  return %y, %wr, %wr2
})IR",
                          R"IR(graph g() {
  %x = input "x" : f32[2,8]
  %wr = param "reshape(w)" {derive="reshape", args=["w"], shape=[2,4]} : f32[2,4]
  %wr2 = param "reshape(w)#2" {derive="reshape", args=["w"], shape=[4,2]} : f32[4,2]
  %sum = param "add(w,b)" {derive="add", args=["w","b"]} : f32[8]
  %y = add(%x, %sum) : f32[2,8]
  return %y, %wr, %wr2
})IR");
  EXPECT_EQ(r.counter("ops_folded"), 3);
  EXPECT_EQ(r.counter("nodes_removed"), 2);
}

TEST(FoldConstants, OneLevelOnly) {
  // scale(w) folds; the reshape over the now-derived param does not (the runtime materializes
  // recipes over file tensors only).
  expect_rewrite(run_fold_constants, R"IR(graph g() {
  %w = param "w" : f32[8]
  %s = scale(%w) {factor=2.0} : f32[8]
  %r = reshape(%s) {shape=[2,4]} : f32[2,4]
  return %r
})IR",
                 R"IR(graph g() {
  %s = param "scale(w)" {derive="scale", args=["w"], factor=2.0} : f32[8]
  %r = reshape(%s) {shape=[2,4]} : f32[2,4]
  return %r
})IR");
}

TEST(FoldConstants, NoChangeWhenAnyInputIsNotAParam) {
  expect_unchanged(run_fold_constants, R"IR(graph g() {
  %x = input "x" : f32[2,8]
  %ids = input "ids" : i32[2]
  %w = param "w" : f32[8]
  %table = param "table" : f32[4,8]
  %0 = add(%x, %w) : f32[2,8]
  %1 = embedding(%table, %ids) : f32[2,8]
  return %0, %1
})IR");
}

}  // namespace
}  // namespace kiln::graph
