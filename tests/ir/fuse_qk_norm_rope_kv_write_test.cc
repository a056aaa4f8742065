#include "kiln/graph/passes/fuse_qk_norm_rope_kv_write.h"

#include "ir/ir_test_util.h"

namespace kiln::graph {
namespace {

using testing::expect_rewrite;
using testing::expect_unchanged;

// q: 2 heads x 8, k and v: 1 head x 8, one layer; refusal tests vary k's norm eps, add nodes
// before the write, return more values, or chain the write after another.
std::string layer(const std::string& k_eps = "1e-06", const std::string& extra = "",
                  const std::string& ret = "%a", const std::string& kv_in = "%kv") {
  return R"IR(graph g() {
  %pos = input "positions" : i32[2]
  %slots = input "slots" : i32[2]
  %bt = input "bt" : i32[2,4]
  %sl = input "sl" : i32[2]
  %ts = input "ts" : i32[2]
  %kv = state "kv" : f16[2,64,8]
  %q = input "q" : f32[2,16]
  %k = input "k" : f32[2,8]
  %v = input "v" : f32[2,8]
  %qw = param "q_norm" : f32[8]
  %kw = param "k_norm" : f32[8]
  %q3 = reshape(%q) {shape=[2,2,8]} : f32[2,2,8]
  %qn = rms_norm(%q3, %qw) {eps=1e-06} : f32[2,2,8]
  %q2 = reshape(%qn) {shape=[2,16]} : f32[2,16]
  %qr = rope(%q2, %pos) {head_dim=8, freq_base=10000.0, neox=1} : f32[2,16]
  %k3 = reshape(%k) {shape=[2,1,8]} : f32[2,1,8]
  %kn = rms_norm(%k3, %kw) {eps=)IR" +
         k_eps + R"IR(} : f32[2,1,8]
  %k2 = reshape(%kn) {shape=[2,8]} : f32[2,8]
  %kr = rope(%k2, %pos) {head_dim=8, freq_base=10000.0, neox=1} : f32[2,8]
)IR" + extra +
         R"IR(
  %t = kv_write()IR" +
         kv_in + R"IR(, %kr, %v, %slots) {layer=0} : token[]
  %a = attention(%qr, %t, %bt, %sl, %pos, %ts) {layer=0, n_heads=2, n_kv_heads=1, head_dim=8, window=0, scale=0.35} : f32[2,16]
  return )IR" +
         ret + "\n}\n";
}

TEST(FuseQkNormRopeKvWrite, FusesAndTheAttentionReadsTheFusedToken) {
  auto r = expect_rewrite(run_fuse_qk_norm_rope_kv_write, layer(), R"IR(graph g() {
  %pos = input "positions" : i32[2]
  %slots = input "slots" : i32[2]
  %bt = input "bt" : i32[2,4]
  %sl = input "sl" : i32[2]
  %ts = input "ts" : i32[2]
  %kv = state "kv" : f16[2,64,8]
  %q = input "q" : f32[2,16]
  %k = input "k" : f32[2,8]
  %v = input "v" : f32[2,8]
  %qw = param "q_norm" : f32[8]
  %kw = param "k_norm" : f32[8]
  %qr, %t = qk_norm_rope_kv_write(%q, %k, %v, %qw, %kw, %pos, %kv, %slots) {eps=1e-06, head_dim=8, freq_base=10000.0, neox=1, layer=0, n_heads=2, n_kv_heads=1} : f32[2,16], token[]
  %a = attention(%qr, %t, %bt, %sl, %pos, %ts) {layer=0, n_heads=2, n_kv_heads=1, head_dim=8, window=0, scale=0.35} : f32[2,16]
  return %a
})IR");
  EXPECT_EQ(r.counter("patterns_fused"), 1);
}

// Replaces every occurrence of `from` in `text` by `to`.
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

TEST(FuseQkNormRopeKvWrite, FusesTheModelsRowsPerHeadView) {
  // model/transformer.cc views q [T, H*hd] as [T*H, hd] rows (not [T, H, hd]) for the per-head
  // norm; the norm is the same, and the pass once missed this form, leaving every Gemma 3 and
  // Qwen 3 layer unfused.
  std::string in = replaced(layer(), "{shape=[2,2,8]} : f32[2,2,8]", "{shape=[4,8]} : f32[4,8]");
  in = replaced(in, "{eps=1e-06} : f32[2,2,8]", "{eps=1e-06} : f32[4,8]");
  in = replaced(in, "{shape=[2,1,8]} : f32[2,1,8]", "{shape=[2,8]} : f32[2,8]");
  in = replaced(in, "} : f32[2,1,8]", "} : f32[2,8]");
  ASSERT_EQ(in.find("[2,2,8]"), std::string::npos);
  ASSERT_EQ(in.find("[2,1,8]"), std::string::npos);
  Graph g = parse(in);
  EXPECT_EQ(run_fuse_qk_norm_rope_kv_write(g, {}).counter("patterns_fused"), 1);
  EXPECT_NO_THROW(verify(g));
  EXPECT_EQ(g.num_nodes(), 13);  // 11 sources, the fused node, the attention
}

TEST(FuseQkNormRopeKvWrite, FusesAOneHeadChainWithoutReshapes) {
  // One KV head (Gemma 3): the model's [T*1, hd] view of k [T, hd] is k's own shape, so
  // noop_elim removes both reshapes and the chain is rms_norm -> rope. Once missed, leaving
  // every layer of a single-KV-head model unfused.
  std::string in = replaced(layer(), "  %k3 = reshape(%k) {shape=[2,1,8]} : f32[2,1,8]\n", "");
  in = replaced(in, "%kn = rms_norm(%k3, %kw) {eps=1e-06} : f32[2,1,8]",
                "%kn = rms_norm(%k, %kw) {eps=1e-06} : f32[2,8]");
  in = replaced(in, "  %k2 = reshape(%kn) {shape=[2,8]} : f32[2,8]\n", "");
  in = replaced(in, "rope(%k2, %pos)", "rope(%kn, %pos)");
  ASSERT_EQ(in.find("%k2"), std::string::npos);
  ASSERT_EQ(in.find("%k3"), std::string::npos);
  Graph g = parse(in);
  EXPECT_EQ(run_fuse_qk_norm_rope_kv_write(g, {}).counter("patterns_fused"), 1);
  EXPECT_NO_THROW(verify(g));
  EXPECT_EQ(g.num_nodes(), 13);
}

TEST(FuseQkNormRopeKvWrite, RefusesANormOverPartsOfHeads) {
  // k viewed as [T*2, 4] rows and normed over 4 of each head's 8 values: not a per-head norm.
  std::string in = replaced(layer(), "{shape=[2,1,8]} : f32[2,1,8]", "{shape=[4,4]} : f32[4,4]");
  in = replaced(in, "} : f32[2,1,8]", "} : f32[4,4]");
  in = replaced(in, "%kw = param \"k_norm\" : f32[8]", "%kw = param \"k_norm\" : f32[4]");
  ASSERT_EQ(in.find("[2,1,8]"), std::string::npos);
  expect_unchanged(run_fuse_qk_norm_rope_kv_write, in);
}

TEST(FuseQkNormRopeKvWrite, RefusesAnExtraConsumerOfTheKChain) {
  expect_unchanged(run_fuse_qk_norm_rope_kv_write, layer("1e-06", "", "%a, %kn"));
  expect_unchanged(run_fuse_qk_norm_rope_kv_write, layer("1e-06", "", "%a, %kr"));
}

TEST(FuseQkNormRopeKvWrite, RefusesRopesThatDisagreeOrAnAttentionOfAnotherLayer) {
  // k roped with another base, another layout (pairs), or other positions than q.
  const std::string k_rope = "%kr = rope(%k2, %pos) {head_dim=8, freq_base=10000.0, neox=1}";
  for (const std::string& other :
       {std::string("%kr = rope(%k2, %pos) {head_dim=8, freq_base=500000.0, neox=1}"),
        std::string("%kr = rope(%k2, %pos) {head_dim=8, freq_base=10000.0, neox=0}"),
        std::string("%kr = rope(%k2, %ts) {head_dim=8, freq_base=10000.0, neox=1}")}) {
    const std::string in = replaced(layer(), k_rope, other);
    ASSERT_NE(in, layer());
    expect_unchanged(run_fuse_qk_norm_rope_kv_write, in);
  }
  // The write is layer 0, the attention reading its token layer 1: not this write's q.
  std::string in = replaced(layer(), "{layer=0, n_heads", "{layer=1, n_heads");
  ASSERT_NE(in, layer());
  expect_unchanged(run_fuse_qk_norm_rope_kv_write, in);
}

// layer() with frequency-factor params %ff and %ff2 (f32[3]) declared, and q's and k's ropes
// replaced by `q_rope` and `k_rope` (written after "rope(%q2, %pos" / "rope(%k2, %pos").
std::string layer_with_ropes(const std::string& q_rope, const std::string& k_rope) {
  const std::string plain = ") {head_dim=8, freq_base=10000.0, neox=1}";
  std::string in = replaced(layer(), "  %kw = param \"k_norm\" : f32[8]\n",
                            "  %kw = param \"k_norm\" : f32[8]\n"
                            "  %ff = param \"rope_freqs\" : f32[3]\n"
                            "  %ff2 = param \"rope_freqs_2\" : f32[3]\n");
  in = replaced(in, "rope(%q2, %pos" + plain, "rope(%q2, %pos" + q_rope);
  in = replaced(in, "rope(%k2, %pos" + plain, "rope(%k2, %pos" + k_rope);
  return in;
}

const char* kPartialWithFactors = ", %ff) {head_dim=8, freq_base=10000.0, neox=1, n_rot=6}";

TEST(FuseQkNormRopeKvWrite, CarriesTheFrequencyFactorsAndNRot) {
  // Llama 3 frequency factors (rope's optional third input) and partial rotary (n_rot=6 of 8):
  // the fused node takes the factors as its optional last input and keeps n_rot.
  const std::string in = layer_with_ropes(kPartialWithFactors, kPartialWithFactors);
  ASSERT_NE(in.find("rope(%k2, %pos, %ff)"), std::string::npos);
  auto r = expect_rewrite(run_fuse_qk_norm_rope_kv_write, in, R"IR(graph g() {
  %pos = input "positions" : i32[2]
  %slots = input "slots" : i32[2]
  %bt = input "bt" : i32[2,4]
  %sl = input "sl" : i32[2]
  %ts = input "ts" : i32[2]
  %kv = state "kv" : f16[2,64,8]
  %q = input "q" : f32[2,16]
  %k = input "k" : f32[2,8]
  %v = input "v" : f32[2,8]
  %qw = param "q_norm" : f32[8]
  %kw = param "k_norm" : f32[8]
  %ff = param "rope_freqs" : f32[3]
  %ff2 = param "rope_freqs_2" : f32[3]
  %qr, %t = qk_norm_rope_kv_write(%q, %k, %v, %qw, %kw, %pos, %kv, %slots, %ff) {eps=1e-06, head_dim=8, freq_base=10000.0, neox=1, layer=0, n_heads=2, n_kv_heads=1, n_rot=6} : f32[2,16], token[]
  %a = attention(%qr, %t, %bt, %sl, %pos, %ts) {layer=0, n_heads=2, n_kv_heads=1, head_dim=8, window=0, scale=0.35} : f32[2,16]
  return %a
})IR");
  EXPECT_EQ(r.counter("patterns_fused"), 1);
}

TEST(FuseQkNormRopeKvWrite, CarriesNRotWithoutFactors) {
  const std::string partial = ") {head_dim=8, freq_base=10000.0, neox=0, n_rot=4}";
  Graph g = parse(layer_with_ropes(partial, partial));
  EXPECT_EQ(run_fuse_qk_norm_rope_kv_write(g, {}).counter("patterns_fused"), 1);
  EXPECT_NO_THROW(verify(g));
  const Node& fused = g.node(g.node(g.outputs()[0].node).inputs[0].node);
  ASSERT_EQ(fused.op, Op::QkNormRopeKvWrite);
  EXPECT_EQ(fused.inputs.size(), 8u);
  EXPECT_EQ(fused.attrs.get_int("n_rot"), 4);
  EXPECT_EQ(fused.attrs.get_int("neox"), 0);
}

TEST(FuseQkNormRopeKvWrite, AnExplicitFullNRotAgreesWithAnAbsentOne) {
  Graph g = parse(layer_with_ropes(") {head_dim=8, freq_base=10000.0, neox=1, n_rot=8}",
                                   ") {head_dim=8, freq_base=10000.0, neox=1}"));
  EXPECT_EQ(run_fuse_qk_norm_rope_kv_write(g, {}).counter("patterns_fused"), 1);
  EXPECT_NO_THROW(verify(g));
}

TEST(FuseQkNormRopeKvWrite, RefusesRopesWithDifferentFactorsOrNRot) {
  const std::string partial = ") {head_dim=8, freq_base=10000.0, neox=1, n_rot=6}";
  const std::string full = ") {head_dim=8, freq_base=10000.0, neox=1}";
  const std::string other_factors = ", %ff2) {head_dim=8, freq_base=10000.0, neox=1, n_rot=6}";
  for (const auto& [q_rope, k_rope] :
       {std::pair{std::string(kPartialWithFactors), partial},        // factors on q only
        std::pair{partial, std::string(kPartialWithFactors)},        // factors on k only
        std::pair{std::string(kPartialWithFactors), other_factors},  // another factor tensor
        std::pair{partial, full}}) {                                 // k rotates all 8 dims
    SCOPED_TRACE("q" + q_rope + " k" + k_rope);
    expect_unchanged(run_fuse_qk_norm_rope_kv_write, layer_with_ropes(q_rope, k_rope));
  }
}

TEST(FuseQkNormRopeKvWrite, ARopedQWithSeveralReadersStillFuses) {
  Graph g = parse(layer("1e-06", "", "%a, %qr"));
  EXPECT_EQ(run_fuse_qk_norm_rope_kv_write(g, {}).counter("patterns_fused"), 1);
  EXPECT_NO_THROW(verify(g));
  // Both readers (the attention and the graph output) now read the fused q.
  const Node& fused = g.node(g.outputs()[1].node);
  EXPECT_EQ(fused.op, Op::QkNormRopeKvWrite);
  EXPECT_EQ(g.node(g.outputs()[0].node).inputs[0], g.outputs()[1]);
}

TEST(FuseQkNormRopeKvWrite, RefusesMismatchedNorms) {
  expect_unchanged(run_fuse_qk_norm_rope_kv_write, layer("1e-05"));
}

TEST(FuseQkNormRopeKvWrite, RefusesWhenAReaderOfTheOldStateNeedsTheFusedQ) {
  // %early reads the state before this write, so it must run before the fused write, but it
  // needs the roped q, which the fused node would produce: the rewrite has no valid order.
  expect_unchanged(
      run_fuse_qk_norm_rope_kv_write,
      layer(
          "1e-06",
          "  %t0 = kv_write(%kv, %v, %v, %slots) {layer=1} : token[]\n"
          "  %early = attention(%qr, %t0, %bt, %sl, %pos, %ts) {layer=1, n_heads=2, n_kv_heads=1, "
          "head_dim=8, window=0, scale=0.35} : f32[2,16]\n",
          "%a, %early", "%t0"));
}

}  // namespace
}  // namespace kiln::graph

namespace kiln::graph {
namespace {

TEST(FuseQkNormRopeKvWrite, AWriteLaterInTheTokenChainStillFuses) {
  // The control for the refusal above: same chain without the early reader.
  Graph g = parse(
      layer("1e-06", "  %t0 = kv_write(%kv, %v, %v, %slots) {layer=1} : token[]\n", "%a", "%t0"));
  EXPECT_EQ(run_fuse_qk_norm_rope_kv_write(g, {}).counter("patterns_fused"), 1);
  EXPECT_NO_THROW(verify(g));
}

}  // namespace
}  // namespace kiln::graph
