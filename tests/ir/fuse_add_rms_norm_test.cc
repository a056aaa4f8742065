#include "kiln/graph/passes/fuse_add_rms_norm.h"

#include "ir/ir_test_util.h"

namespace kiln::graph {
namespace {

using testing::expect_rewrite;
using testing::expect_unchanged;

TEST(FuseAddRmsNorm, FusesAndKeepsTheSumForTheResidual) {
  auto r = expect_rewrite(run_fuse_add_rms_norm, R"IR(graph g() {
  %x = input "x" : f32[2,8]
  %y = input "y" : f32[2,8]
  %w = param "w" : f32[8]
  %s = add(%x, %y) : f32[2,8]
  %n = rms_norm(%s, %w) {eps=1e-06} : f32[2,8]
  %g = gelu(%n) : f32[2,8]
  %out = add(%s, %g) : f32[2,8]
  return %out
})IR",
                          R"IR(graph g() {
  %x = input "x" : f32[2,8]
  %y = input "y" : f32[2,8]
  %w = param "w" : f32[8]
  %s, %n = add_rms_norm(%x, %y, %w) {eps=1e-06} : f32[2,8], f32[2,8]
  %g = gelu(%n) : f32[2,8]
  %out = add(%s, %g) : f32[2,8]
  return %out
})IR");
  EXPECT_EQ(r.counter("patterns_fused"), 1);
}

TEST(FuseAddRmsNorm, AWeightDeclaredLateAndASideEffectInBetweenDoNotBlock) {
  // Both ops are pure: moving the pair past the KV write is safe, and the late weight only
  // moves the fused node below it.
  expect_rewrite(run_fuse_add_rms_norm, R"IR(graph g() {
  %x = input "x" : f32[1,8]
  %kv = state "kv" : f16[4,8]
  %sl = input "sl" : i32[1]
  %s = add(%x, %x) : f32[1,8]
  %t = kv_write(%kv, %s, %s, %sl) {layer=0} : token[]
  %w = param "w" : f32[8]
  %n = rms_norm(%s, %w) {eps=1e-05} : f32[1,8]
  return %n, %t
})IR",
                 R"IR(graph g() {
  %x = input "x" : f32[1,8]
  %kv = state "kv" : f16[4,8]
  %sl = input "sl" : i32[1]
  %w = param "w" : f32[8]
  %s, %n = add_rms_norm(%x, %x, %w) {eps=1e-05} : f32[1,8], f32[1,8]
  %t = kv_write(%kv, %s, %s, %sl) {layer=0} : token[]
  return %n, %t
})IR");
}

TEST(FuseAddRmsNorm, RefusesABiasAdd) {
  expect_unchanged(run_fuse_add_rms_norm, R"IR(graph g() {
  %x = input "x" : f32[2,8]
  %b = param "b" : f32[8]
  %w = param "w" : f32[8]
  %s = add(%x, %b) : f32[2,8]
  %n = rms_norm(%s, %w) {eps=1e-06} : f32[2,8]
  return %n
})IR");
}

TEST(FuseAddRmsNorm, NoChange) {
  expect_unchanged(run_fuse_add_rms_norm, R"IR(graph g() {
  %x = input "x" : f32[2,8]
  %w = param "w" : f32[8]
  %s = mul(%x, %x) : f32[2,8]
  %n = rms_norm(%s, %w) {eps=1e-06} : f32[2,8]
  return %n
})IR");
}

TEST(FuseAddRmsNorm, ASumNormedTwiceFusesOnceAndTheOtherNormReadsTheSum) {
  expect_rewrite(run_fuse_add_rms_norm, R"IR(graph g() {
  %a = input "a" : f32[2,8]
  %b = input "b" : f32[2,8]
  %w = param "w" : f32[8]
  %v = param "v" : f32[8]
  %s = add(%a, %b) : f32[2,8]
  %n = rms_norm(%s, %w) {eps=1e-06} : f32[2,8]
  %m = rms_norm(%s, %v) {eps=1e-05} : f32[2,8]
  return %n, %m
})IR",
                 R"IR(graph g() {
  %a = input "a" : f32[2,8]
  %b = input "b" : f32[2,8]
  %w = param "w" : f32[8]
  %v = param "v" : f32[8]
  %s, %n = add_rms_norm(%a, %b, %w) {eps=1e-06} : f32[2,8], f32[2,8]
  %m = rms_norm(%s, %v) {eps=1e-05} : f32[2,8]
  return %n, %m
})IR");
}

}  // namespace
}  // namespace kiln::graph
