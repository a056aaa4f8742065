#include "kiln/graph/passes/fuse_matmul_gated.h"

#include "ir/ir_test_util.h"

namespace kiln::graph {
namespace {

using testing::expect_rewrite;
using testing::expect_unchanged;

TEST(FuseMatmulGated, GeluAndSilu) {
  auto r = expect_rewrite(run_fuse_matmul_gated, R"IR(graph g() {
  %x = input "x" : f32[2,32]
  %w = param "wg+wu" {concat=["wg","wu"]} : q8_0[96,32]
  %g, %u = matmul_split(%x, %w) {splits=[48,48]} : f32[2,48], f32[2,48]
  %h = gelu_mul(%g, %u) : f32[2,48]
  %w2 = param "wg2+wu2" {concat=["wg2","wu2"]} : q4_k[512,256]
  %y = input "y" : f32[3,256]
  %g2, %u2 = matmul_split(%y, %w2) {splits=[256,256]} : f32[3,256], f32[3,256]
  %h2 = silu_mul(%g2, %u2) : f32[3,256]
  return %h, %h2
})IR",
                          R"IR(graph g() {
  %x = input "x" : f32[2,32]
  %w = param "wg+wu" {concat=["wg","wu"]} : q8_0[96,32]
  %h = matmul_gelu_mul(%x, %w) : f32[2,48]
  %w2 = param "wg2+wu2" {concat=["wg2","wu2"]} : q4_k[512,256]
  %y = input "y" : f32[3,256]
  %h2 = matmul_silu_mul(%y, %w2) : f32[3,256]
  return %h, %h2
})IR");
  EXPECT_EQ(r.counter("patterns_fused"), 2);
}

TEST(FuseMatmulGated, RefusesAHalfWithAnotherUse) {
  expect_unchanged(run_fuse_matmul_gated, R"IR(graph g() {
  %x = input "x" : f32[2,32]
  %w = param "wg+wu" {concat=["wg","wu"]} : q8_0[96,32]
  %g, %u = matmul_split(%x, %w) {splits=[48,48]} : f32[2,48], f32[2,48]
  %h = gelu_mul(%g, %u) : f32[2,48]
  return %h, %u
})IR");
  expect_unchanged(run_fuse_matmul_gated, R"IR(graph g() {
  %x = input "x" : f32[2,32]
  %w = param "wg+wu" {concat=["wg","wu"]} : q8_0[96,32]
  %g, %u = matmul_split(%x, %w) {splits=[48,48]} : f32[2,48], f32[2,48]
  %h = silu_mul(%g, %u) : f32[2,48]
  %s = add(%g, %h) : f32[2,48]
  return %s
})IR");
}

TEST(FuseMatmulGated, RefusesHalvesSwappedOrUnequalOrQkv) {
  expect_unchanged(run_fuse_matmul_gated, R"IR(graph g() {
  %x = input "x" : f32[2,32]
  %w = param "wg+wu" {concat=["wg","wu"]} : q8_0[96,32]
  %g, %u = matmul_split(%x, %w) {splits=[48,48]} : f32[2,48], f32[2,48]
  %h = gelu_mul(%u, %g) : f32[2,48]
  return %h
})IR");
  expect_unchanged(run_fuse_matmul_gated, R"IR(graph g() {
  %x = input "x" : f32[2,32]
  %w = param "wa+wb" {concat=["wa","wb"]} : q8_0[96,32]
  %a, %b = matmul_split(%x, %w) {splits=[64,32]} : f32[2,64], f32[2,32]
  %p = param "p" : f32[2,32]
  %c = add(%a, %a) : f32[2,64]
  %h = gelu_mul(%b, %p) : f32[2,32]
  return %c, %h
})IR");
  expect_unchanged(run_fuse_matmul_gated, R"IR(graph g() {
  %x = input "x" : f32[2,32]
  %w = param "wa+wb" {concat=["wa","wb"]} : q8_0[96,32]
  %a, %b = matmul_split(%x, %w) {splits=[64,32]} : f32[2,64], f32[2,32]
  %b2 = input "b2" : f32[2,64]
  %h = silu_mul(%a, %b2) : f32[2,64]
  return %h, %b
})IR");
  expect_unchanged(run_fuse_matmul_gated, R"IR(graph g() {
  %x = input "x" : f32[2,32]
  %w = param "wq+wk+wv" {concat=["wq","wk","wv"]} : q8_0[96,32]
  %q, %k, %v = matmul_split(%x, %w) {splits=[32,32,32]} : f32[2,32], f32[2,32], f32[2,32]
  %h = silu_mul(%q, %k) : f32[2,32]
  return %h, %v
})IR");
}

TEST(FuseMatmulGated, NoChange) {
  expect_unchanged(run_fuse_matmul_gated, R"IR(graph g() {
  %a = input "a" : f32[2,8]
  %b = input "b" : f32[2,8]
  %h = gelu_mul(%a, %b) : f32[2,8]
  return %h
})IR");
}

}  // namespace
}  // namespace kiln::graph
