#include "kiln/graph/passes/fuse_gated_activation.h"

#include "ir/ir_test_util.h"

namespace kiln::graph {
namespace {

using testing::expect_rewrite;
using testing::expect_unchanged;

TEST(FuseGatedActivation, GeluAndSiluEitherOperandOrder) {
  auto r = expect_rewrite(run_fuse_gated_activation, R"IR(graph g() {
  %a = input "a" : f32[2,8]
  %b = input "b" : f32[2,8]
  %g = gelu(%a) : f32[2,8]
  %h = mul(%g, %b) : f32[2,8]
  %s = silu(%b) : f32[2,8]
  %h2 = mul(%a, %s) : f32[2,8]
  return %h, %h2
})IR",
                          R"IR(graph g() {
  %a = input "a" : f32[2,8]
  %b = input "b" : f32[2,8]
  %h = gelu_mul(%a, %b) : f32[2,8]
  %h2 = silu_mul(%b, %a) : f32[2,8]
  return %h, %h2
})IR");
  EXPECT_EQ(r.counter("patterns_fused"), 2);
}

TEST(FuseGatedActivation, RefusesAnActivationWithAnotherUse) {
  expect_unchanged(run_fuse_gated_activation, R"IR(graph g() {
  %a = input "a" : f32[2,8]
  %b = input "b" : f32[2,8]
  %g = gelu(%a) : f32[2,8]
  %h = mul(%g, %b) : f32[2,8]
  return %h, %g
})IR");
  expect_unchanged(run_fuse_gated_activation, R"IR(graph g() {
  %a = input "a" : f32[2,8]
  %g = silu(%a) : f32[2,8]
  %h = mul(%g, %g) : f32[2,8]
  return %h
})IR");
}

TEST(FuseGatedActivation, RefusesABroadcastOperand) {
  expect_unchanged(run_fuse_gated_activation, R"IR(graph g() {
  %a = input "a" : f32[2,8]
  %b = param "b" : f32[8]
  %g = gelu(%a) : f32[2,8]
  %h = mul(%g, %b) : f32[2,8]
  return %h
})IR");
}

TEST(FuseGatedActivation, NoChange) {
  expect_unchanged(run_fuse_gated_activation, R"IR(graph g() {
  %a = input "a" : f32[2,8]
  %g = softcap(%a) {cap=30.0} : f32[2,8]
  %h = mul(%g, %a) : f32[2,8]
  return %h
})IR");
}

}  // namespace
}  // namespace kiln::graph
