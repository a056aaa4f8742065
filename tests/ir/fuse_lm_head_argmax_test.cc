#include "kiln/graph/passes/fuse_lm_head_argmax.h"

#include "ir/ir_test_util.h"

namespace kiln::graph {
namespace {

using testing::expect_rewrite;
using testing::expect_unchanged;

constexpr const char* kHead = R"IR(graph g() {
  %x = input "x" : f32[2,32]
  %nw = param "output_norm" : f32[32]
  %emb = param "token_embd" : q8_0[100,32]
  %n = rms_norm(%x, %nw) {eps=1e-06} : f32[2,32]
  %logits = matmul(%n, %emb) : f32[2,100]
  %tok = argmax(%logits) : i32[2]
)IR";

TEST(FuseLmHeadArgmax, NeverWritesTheLogits) {
  auto r = expect_rewrite(run_fuse_lm_head_argmax, std::string(kHead) + "  return %tok\n}",
                          R"IR(graph g() {
  %x = input "x" : f32[2,32]
  %nw = param "output_norm" : f32[32]
  %emb = param "token_embd" : q8_0[100,32]
  %tok = norm_matmul_argmax(%x, %nw, %emb) {eps=1e-06} : i32[2]
  return %tok
})IR");
  EXPECT_EQ(r.counter("patterns_fused"), 1);
}

TEST(FuseLmHeadArgmax, RefusesWhenLogitsOrNormedValuesAreUsedElsewhere) {
  expect_unchanged(run_fuse_lm_head_argmax, std::string(kHead) + "  return %tok, %logits\n}");
  expect_unchanged(
      run_fuse_lm_head_argmax,
      std::string(kHead) + "  %z = softcap(%logits) {cap=30.0} : f32[2,100]\n  return %tok, %z\n}");
  expect_unchanged(run_fuse_lm_head_argmax, std::string(kHead) + "  return %tok, %n\n}");
}

TEST(FuseLmHeadArgmax, RefusesANormOverHeads) {
  expect_unchanged(run_fuse_lm_head_argmax, R"IR(graph g() {
  %x = input "x" : f32[2,4,8]
  %nw = param "nw" : f32[8]
  %w = param "w" : f32[10,32]
  %n = rms_norm(%x, %nw) {eps=1e-06} : f32[2,4,8]
  %f = reshape(%n) {shape=[2,32]} : f32[2,32]
  %logits = matmul(%f, %w) : f32[2,10]
  %tok = argmax(%logits) : i32[2]
  return %tok
})IR");
}

}  // namespace
}  // namespace kiln::graph
