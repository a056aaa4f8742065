#include "kiln/graph/passes/fuse_matmul_merge.h"

#include "ir/ir_test_util.h"

namespace kiln::graph {
namespace {

using testing::expect_rewrite;
using testing::expect_unchanged;

TEST(FuseMatmulMerge, MergesQkvAndGateUp) {
  auto r = expect_rewrite(run_fuse_matmul_merge, R"IR(graph g() {
  %x = input "x" : f32[2,32]
  %wq = param "wq" : q8_0[64,32]
  %wk = param "wk" : q8_0[32,32]
  %wv = param "wv" : q8_0[32,32]
  %q = matmul(%x, %wq) : f32[2,64]
  %k = matmul(%x, %wk) : f32[2,32]
  %v = matmul(%x, %wv) : f32[2,32]
  %a = add(%k, %v) : f32[2,32]
  %wg = param "wg" : f32[48,32]
  %wu = param "wu" : f32[48,32]
  %g = matmul(%a, %wg) : f32[2,48]
  %u = matmul(%a, %wu) : f32[2,48]
  return %q, %g, %u
})IR",
                          R"IR(graph g() {
  %x = input "x" : f32[2,32]
  %0 = param "wq+wk+wv" {concat=["wq","wk","wv"]} : q8_0[128,32]
  %q, %k, %v = matmul_split(%x, %0) {splits=[64,32,32]} : f32[2,64], f32[2,32], f32[2,32]
  %a = add(%k, %v) : f32[2,32]
  %1 = param "wg+wu" {concat=["wg","wu"]} : f32[96,32]
  %g, %u = matmul_split(%a, %1) {splits=[48,48]} : f32[2,48], f32[2,48]
  return %q, %g, %u
})IR");
  EXPECT_EQ(r.counter("matmuls_merged"), 5);
  EXPECT_EQ(r.counter("patterns_fused"), 2);
}

TEST(FuseMatmulMerge, GroupsByWeightDtype) {
  // q and v (q8_0) merge; k (f32) cannot share their buffer and stays.
  expect_rewrite(run_fuse_matmul_merge, R"IR(graph g() {
  %x = input "x" : f32[2,32]
  %wq = param "wq" : q8_0[64,32]
  %wk = param "wk" : f32[32,32]
  %wv = param "wv" : q8_0[32,32]
  %q = matmul(%x, %wq) : f32[2,64]
  %k = matmul(%x, %wk) : f32[2,32]
  %v = matmul(%x, %wv) : f32[2,32]
  return %q, %k, %v
})IR",
                 R"IR(graph g() {
  %x = input "x" : f32[2,32]
  %wk = param "wk" : f32[32,32]
  %0 = param "wq+wv" {concat=["wq","wv"]} : q8_0[96,32]
  %q, %v = matmul_split(%x, %0) {splits=[64,32]} : f32[2,64], f32[2,32]
  %k = matmul(%x, %wk) : f32[2,32]
  return %q, %k, %v
})IR");
}

TEST(FuseMatmulMerge, RefusesMismatchedDtypesComputedWeightsAndDifferentInputs) {
  expect_unchanged(run_fuse_matmul_merge, R"IR(graph g() {
  %x = input "x" : f32[2,32]
  %y = input "y" : f32[2,32]
  %wq = param "wq" : q8_0[64,32]
  %wk = param "wk" : f32[32,32]
  %wc = add(%wk, %wk) : f32[32,32]
  %q = matmul(%x, %wq) : f32[2,64]
  %k = matmul(%x, %wk) : f32[2,32]
  %c = matmul(%x, %wc) : f32[2,32]
  %o = matmul(%y, %wq) : f32[2,64]
  return %q, %k, %c, %o
})IR");
}

TEST(FuseMatmulMerge, MergesAtMostFourPerGemmAndLeavesALoneRestAlone) {
  // A merged GEMM has at most 4 outputs (Step::out): five projections of x become one
  // 4-way split and one plain matmul.
  auto r = expect_rewrite(run_fuse_matmul_merge, R"IR(graph g() {
  %x = input "x" : f32[2,32]
  %w0 = param "w0" : q8_0[16,32]
  %w1 = param "w1" : q8_0[8,32]
  %w2 = param "w2" : q8_0[8,32]
  %w3 = param "w3" : q8_0[4,32]
  %w4 = param "w4" : q8_0[4,32]
  %y0 = matmul(%x, %w0) : f32[2,16]
  %y1 = matmul(%x, %w1) : f32[2,8]
  %y2 = matmul(%x, %w2) : f32[2,8]
  %y3 = matmul(%x, %w3) : f32[2,4]
  %y4 = matmul(%x, %w4) : f32[2,4]
  return %y0, %y1, %y2, %y3, %y4
})IR",
                          R"IR(graph g() {
  %x = input "x" : f32[2,32]
  %w4 = param "w4" : q8_0[4,32]
  %0 = param "w0+w1+w2+w3" {concat=["w0","w1","w2","w3"]} : q8_0[36,32]
  %y0, %y1, %y2, %y3 = matmul_split(%x, %0) {splits=[16,8,8,4]} : f32[2,16], f32[2,8], f32[2,8], f32[2,4]
  %y4 = matmul(%x, %w4) : f32[2,4]
  return %y0, %y1, %y2, %y3, %y4
})IR");
  EXPECT_EQ(r.counter("matmuls_merged"), 4);
}

}  // namespace
}  // namespace kiln::graph
