#include "kiln/graph/passes/fuse_matmul_add.h"

#include "ir/ir_test_util.h"

namespace kiln::graph {
namespace {

using testing::expect_rewrite;
using testing::expect_unchanged;

TEST(FuseMatmulAdd, FoldsTheResidualIntoTheGemm) {
  auto r = expect_rewrite(run_fuse_matmul_add, R"IR(graph g() {
  %x = input "x" : f32[2,32]
  %res = input "res" : f32[2,16]
  %w = param "w" : q8_0[16,32]
  %y = matmul(%x, %w) : f32[2,16]
  %s = add(%res, %y) : f32[2,16]
  return %s
})IR",
                          R"IR(graph g() {
  %x = input "x" : f32[2,32]
  %res = input "res" : f32[2,16]
  %w = param "w" : q8_0[16,32]
  %s = matmul_add(%x, %w, %res) : f32[2,16]
  return %s
})IR");
  EXPECT_EQ(r.counter("patterns_fused"), 1);
}

TEST(FuseMatmulAdd, RefusesAnExtraConsumerOrAGraphOutput) {
  expect_unchanged(run_fuse_matmul_add, R"IR(graph g() {
  %x = input "x" : f32[2,32]
  %res = input "res" : f32[2,16]
  %w = param "w" : q8_0[16,32]
  %y = matmul(%x, %w) : f32[2,16]
  %s = add(%y, %res) : f32[2,16]
  %z = gelu(%y) : f32[2,16]
  return %s, %z
})IR");
  expect_unchanged(run_fuse_matmul_add, R"IR(graph g() {
  %x = input "x" : f32[2,32]
  %res = input "res" : f32[2,16]
  %w = param "w" : q8_0[16,32]
  %y = matmul(%x, %w) : f32[2,16]
  %s = add(%y, %res) : f32[2,16]
  return %s, %y
})IR");
}

TEST(FuseMatmulAdd, RefusesABiasShapedResidual) {
  expect_unchanged(run_fuse_matmul_add, R"IR(graph g() {
  %x = input "x" : f32[2,32]
  %b = param "b" : f32[16]
  %w = param "w" : q8_0[16,32]
  %y = matmul(%x, %w) : f32[2,16]
  %s = add(%y, %b) : f32[2,16]
  return %s
})IR");
}

}  // namespace
}  // namespace kiln::graph
