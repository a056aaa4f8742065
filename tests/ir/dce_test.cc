#include "kiln/graph/passes/dce.h"

#include "ir/ir_test_util.h"

namespace kiln::graph {
namespace {

using testing::expect_rewrite;
using testing::expect_unchanged;

TEST(Dce, RemovesUnusedNodesAndParamsButKeepsInterfaceAndEffects) {
  auto r = expect_rewrite(run_dce, R"IR(graph g() {
  %x = input "x" : f32[1,8]
  %unused_in = input "u" : f32[1,8]
  %kv = state "kv" : f16[4,8]
  %s = input "s" : i32[1]
  %w = param "w" : f32[8]
  %0 = rms_norm(%x, %w) {eps=1e-06} : f32[1,8]
  %1 = gelu(%0) : f32[1,8]
  %2 = kv_write(%kv, %x, %x, %s) {layer=0} : token[]
  %3 = scale(%x) {factor=2.0} : f32[1,8]
  return %3
})IR",
                          R"IR(graph g() {
  %x = input "x" : f32[1,8]
  %unused_in = input "u" : f32[1,8]
  %kv = state "kv" : f16[4,8]
  %s = input "s" : i32[1]
  %2 = kv_write(%kv, %x, %x, %s) {layer=0} : token[]
  %3 = scale(%x) {factor=2.0} : f32[1,8]
  return %3
})IR");
  EXPECT_EQ(r.counter("nodes_removed"), 3);
}

TEST(Dce, NoChange) {
  expect_unchanged(run_dce, R"IR(graph g() {
  %x = input "x" : f32[1,8]
  %w = param "w" : f32[8]
  %0 = rms_norm(%x, %w) {eps=1e-06} : f32[1,8]
  return %0
})IR");
}

}  // namespace
}  // namespace kiln::graph
