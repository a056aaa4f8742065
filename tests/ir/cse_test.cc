#include "kiln/graph/passes/cse.h"

#include "ir/ir_test_util.h"

namespace kiln::graph {
namespace {

using testing::expect_rewrite;
using testing::expect_unchanged;

TEST(Cse, MergesDuplicatesAndTheirDependents) {
  auto r = expect_rewrite(run_cse, R"IR(graph g() {
  %x = input "x" : f32[2,8]
  %w = param "w" : f32[8]
  %w2 = param "w" : f32[8]
  %0 = rms_norm(%x, %w) {eps=1e-06} : f32[2,8]
  %1 = rms_norm(%x, %w2) {eps=1e-06} : f32[2,8]
  %2 = gelu(%0) : f32[2,8]
  %3 = gelu(%1) : f32[2,8]
  %4 = add(%2, %3) : f32[2,8]
  return %4
})IR",
                          R"IR(graph g() {
  %x = input "x" : f32[2,8]
  %w = param "w" : f32[8]
  %0 = rms_norm(%x, %w) {eps=1e-06} : f32[2,8]
  %2 = gelu(%0) : f32[2,8]
  %4 = add(%2, %2) : f32[2,8]
  return %4
})IR");
  EXPECT_EQ(r.counter("nodes_merged"), 3);
}

TEST(Cse, NeverMergesSideEffects) {
  expect_unchanged(run_cse, R"IR(graph g() {
  %kv = state "kv" : f16[4,8]
  %k = input "k" : f32[1,8]
  %s = input "s" : i32[1]
  %0 = kv_write(%kv, %k, %k, %s) {layer=0} : token[]
  %1 = kv_write(%0, %k, %k, %s) {layer=0} : token[]
  return %1
})IR");
}

TEST(Cse, NoChangeWhenAttributesOrOperandOrderDiffer) {
  expect_unchanged(run_cse, R"IR(graph g() {
  %x = input "x" : f32[2,8]
  %y = input "y" : f32[2,8]
  %0 = scale(%x) {factor=2.0} : f32[2,8]
  %1 = scale(%x) {factor=3.0} : f32[2,8]
  %2 = add(%x, %y) : f32[2,8]
  %3 = add(%y, %x) : f32[2,8]
  return %0, %1, %2, %3
})IR");
}

}  // namespace
}  // namespace kiln::graph
