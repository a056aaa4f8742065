// read_model_config on small synthetic files: the features the oracle fixtures cannot carry
// (RoPE scalings kiln refuses, LongRoPE tensors, the per-layer sliding pattern array) and the
// rules that depend on sizes (the Gemma 27B attention scale), plus the fused-tensor row map.
#include "kiln/model/model_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "gguf_test_builder.h"
#include "kiln/base/error.h"
#include "kiln/model/architecture_traits.h"
#include "kiln/model/deepseek_config.h"
#include "kiln/model/fused_tensors.h"

namespace kiln::model {
namespace {

using testing::Bytes;
using testing::encode_array;
using testing::encode_scalar;
using testing::GgufBuilder;

constexpr uint32_t kF32 = 0;  // ggml type id

struct ConfigFile {
  std::string arch = "llama";
  uint32_t layers = 2, embd = 64, ff = 128, heads = 4, kv_heads = 2;
  GgufBuilder b;

  explicit ConfigFile(std::string a, uint32_t n_layers = 2) : arch(std::move(a)), layers(n_layers) {
    const std::string p = arch + ".";
    b.add_string("general.architecture", arch);
    b.add_u32(p + "block_count", layers);
    b.add_u32(p + "embedding_length", embd);
    b.add_u32(p + "feed_forward_length", ff);
    b.add_u32(p + "attention.head_count", heads);
    b.add_u32(p + "attention.head_count_kv", kv_heads);
    b.add_u32(p + "context_length", 256);
    b.add_kv(p + "attention.layer_norm_rms_epsilon", GgufType::F32, encode_scalar(1e-6f));
    // LayerNorm architectures' key (starcoder2, command-r, falcon), another value to tell them
    b.add_kv(p + "attention.layer_norm_epsilon", GgufType::F32, encode_scalar(1e-5f));
    b.add_tensor("token_embd.weight", kF32, {embd, 32}, embd * 32 * 4);
  }
  ModelConfig read() {
    auto bytes = std::make_shared<Bytes>(b.build());
    auto file = GgufFile::from_bytes(bytes->data(), bytes->size(), bytes, arch + ".gguf");
    return read_model_config(*file);
  }
};

void expect_error_mentioning(ConfigFile& f, const std::string& text) {
  try {
    f.read();
    FAIL() << "expected an error mentioning '" << text << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST(ModelConfig, RefusesRopeScalingsKilnDoesNotImplement) {
  for (const char* type : {"yarn", "linear"}) {
    ConfigFile f("llama");
    f.b.add_string("llama.rope.scaling.type", type);
    expect_error_mentioning(f, std::string("rope scaling '") + type + "'");
  }
  ConfigFile none("llama");
  none.b.add_string("llama.rope.scaling.type", "none");
  EXPECT_NO_THROW(none.read());
}

// Found by fuzz/gguf_fuzzer: a block_count of two billion sized the per-layer table before any
// tensor was looked at (an out-of-memory abort instead of an error).
TEST(ModelConfig, RefusesAnAbsurdLayerCount) {
  ConfigFile f("llama", 2000000000u);
  expect_error_mentioning(f, "block_count 2000000000 is more than kiln supports");
  ConfigFile g("gemma3", 2000000000u);
  expect_error_mentioning(g, "block_count 2000000000 is more than kiln supports");
}

TEST(ModelConfig, RefusesLongRope) {
  ConfigFile f("phi3");
  f.b.add_tensor("rope_factors_long.weight", kF32, {8}, 32);
  expect_error_mentioning(f, "LongRoPE");
}

TEST(ModelConfig, RopeFactorsAndPartialRotary) {
  ConfigFile f("llama");
  f.b.add_u32("llama.rope.dimension_count", 12);
  f.b.add_tensor(kRopeFreqsTensor, kF32, {6}, 24);
  ModelConfig c = f.read();
  EXPECT_EQ(c.n_rot, 12);
  EXPECT_TRUE(c.rope_freq_factors);

  ConfigFile wrong("llama");
  wrong.b.add_tensor(kRopeFreqsTensor, kF32, {5}, 20);  // head_dim 16 needs 8 factors
  expect_error_mentioning(wrong, "expected 8");

  ConfigFile odd("llama");
  odd.b.add_u32("llama.rope.dimension_count", 17);
  expect_error_mentioning(odd, "rope.dimension_count 17");
}

// Gemma's query_pre_attn_scalar is not in the file: n_embd / n_head at 27B (62 layers for Gemma
// 3, 46 for Gemma 2), head_dim otherwise; an explicit attention.scale wins.
TEST(ModelConfig, GemmaAttentionScaleBySize) {
  for (auto [arch, layers_27b] : {std::pair{"gemma3", 62u}, std::pair{"gemma2", 46u}}) {
    SCOPED_TRACE(arch);
    ConfigFile small(arch, 6);
    small.b.add_u32(std::string(arch) + ".attention.key_length", 8);
    small.b.add_u32(std::string(arch) + ".attention.value_length", 8);
    EXPECT_DOUBLE_EQ(small.read().attention_scale, 1.0 / std::sqrt(8.0));
    ConfigFile big(arch, layers_27b);
    big.b.add_u32(std::string(arch) + ".attention.key_length", 8);
    big.b.add_u32(std::string(arch) + ".attention.value_length", 8);
    EXPECT_DOUBLE_EQ(big.read().attention_scale, 1.0 / std::sqrt(64.0 / 4));
    ConfigFile expl(arch, layers_27b);
    expl.b.add_kv(std::string(arch) + ".attention.scale", GgufType::F32, encode_scalar(0.5f));
    EXPECT_DOUBLE_EQ(expl.read().attention_scale, 0.5);
  }
}

TEST(ModelConfig, SlidingPatternAsPeriodOrPerLayerFlags) {
  ConfigFile period("gemma3", 6);
  period.b.add_u32("gemma3.attention.sliding_window", 8);
  ModelConfig c = period.read();
  for (int il = 0; il < 6; ++il) EXPECT_EQ(c.layers[il].window, il == 5 ? 0 : 8) << il;

  ConfigFile flags("gemma3", 4);
  flags.b.add_u32("gemma3.attention.sliding_window", 8);
  Bytes elems;
  for (uint8_t v : {0, 1, 1, 0}) testing::append_le(elems, v);
  flags.b.add_kv("gemma3.attention.sliding_window_pattern", GgufType::Array,
                 encode_array(GgufType::Bool, 4, elems));
  c = flags.read();
  EXPECT_EQ(c.layers[0].window, 0);
  EXPECT_EQ(c.layers[1].window, 8);
  EXPECT_EQ(c.layers[2].window, 8);
  EXPECT_EQ(c.layers[3].window, 0);

  ConfigFile gemma2("gemma2", 4);  // always slides; every other layer, window 4096 by default
  c = gemma2.read();
  EXPECT_EQ(c.layers[0].window, 4096);
  EXPECT_EQ(c.layers[1].window, 0);
}

// Phi-3's fused tensors are served as row ranges: q, k, v of attn_qkv; gate then up of ffn_up.
TEST(ModelConfig, Phi3FusedTensorRows) {
  ConfigFile f("phi3", 1);
  f.b.add_tensor("blk.0.attn_qkv.weight", kF32, {64, 128}, 64 * 128 * 4);
  f.b.add_tensor("blk.0.ffn_up.weight", kF32, {64, 256}, 64 * 256 * 4);
  ModelConfig c = f.read();
  ASSERT_TRUE(c.fused_qkv && c.fused_gate_up);
  FusedTensorMap m = fused_tensor_slices(c);
  EXPECT_EQ(m.at("blk.0.attn_q.weight").end, 64);
  EXPECT_EQ(m.at("blk.0.attn_k.weight").begin, 64);
  EXPECT_EQ(m.at("blk.0.attn_v.weight").end, 128);
  EXPECT_EQ(m.at("blk.0.ffn_gate.weight").end, 128);
  EXPECT_EQ(m.at("blk.0.ffn_up.weight").begin, 128);
  EXPECT_EQ(m.at("blk.0.ffn_up.weight").source, "blk.0.ffn_up.weight");
}

// Each row of the architecture table, read from a file that gives only the required keys,
// turns on exactly the options the row names (the HF reader's agreement with the GGUF one is
// HfConfigVsGguf's, on the oracle models).
TEST(ModelConfig, EveryArchitectureRowReadsAsItsTraits) {
  for (const ArchitectureTraits& t : kArchitectures) {
    SCOPED_TRACE(std::string(t.arch));
    ConfigFile f{std::string(t.arch)};
    const std::string p = f.arch + ".";
    if (t.experts == Experts::kAlways) {
      f.b.add_u32(p + "expert_count", 4);
      f.b.add_u32(p + "expert_used_count", 2);
      f.b.add_u32(p + "expert_feed_forward_length", 32);
    }
    if (t.gemma) f.b.add_u32(p + "attention.sliding_window", 8);
    if (t.arch == "granite") {  // required, as llama.cpp requires it
      f.b.add_kv(p + "logit_scale", GgufType::F32, encode_scalar(8.0f));
    }
    if (t.arch == "deepseek2") {  // the latent attention's dimensions have no defaults
      f.b.add_u32(p + "rope.dimension_count", 8);
      f.b.add_u32(p + "attention.key_length_mla", 24);
      f.b.add_u32(p + "attention.value_length_mla", 16);
      f.b.add_u32(p + "attention.kv_lora_rank", 32);
    }
    if (t.arch == "gpt-oss") {  // its window has no default; every layer has sinks
      f.b.add_u32(p + "attention.sliding_window", 8);
      f.b.add_tensor("blk.0.attn_sinks.weight", kF32, {8}, 8 * 4);
    }
    const ModelConfig c = f.read();
    EXPECT_EQ(c.rope_neox, t.gguf_rope_neox);
    EXPECT_EQ(c.qkv_bias, t.qkv_bias);
    EXPECT_EQ(c.qk_norm, t.qk_norm);
    EXPECT_EQ(c.post_norms, t.gemma || t.arch == "olmo2");
    EXPECT_EQ(c.pre_norms, t.arch != "olmo2");
    EXPECT_EQ(c.qk_norm_full, t.arch == "olmo2");
    EXPECT_EQ(c.attn_sinks, t.arch == "gpt-oss");
    EXPECT_EQ(c.moe_softmax_topk, t.arch == "gpt-oss");
    EXPECT_EQ(c.scale_embeddings, t.gemma);
    Activation act = t.gemma ? Activation::GeluTanh : Activation::Silu;
    if (t.plain_ffn == PlainFfn::kGeluTanh) act = Activation::GeluTanh;
    if (t.plain_ffn == PlainFfn::kGeluErf) act = Activation::GeluErf;
    EXPECT_EQ(c.activation, act);
    EXPECT_EQ(c.gated_ffn, t.plain_ffn == PlainFfn::kNone);
    EXPECT_EQ(c.layer_norm, t.layer_norm);
    EXPECT_EQ(c.parallel_block, t.parallel_block);
    EXPECT_FLOAT_EQ(static_cast<float>(c.rms_eps), t.layer_norm ? 1e-5f : 1e-6f);
    EXPECT_EQ(c.n_experts > 0, t.experts == Experts::kAlways);
    // The file has no ffn_gate tensor: a gated FFN's ffn_up is then gate+up.
    EXPECT_EQ(c.fused_gate_up, t.fused_projections && t.plain_ffn == PlainFfn::kNone);
    bool any_sliding = false;
    for (const LayerConfig& l : c.layers) any_sliding = any_sliding || l.sliding;
    EXPECT_EQ(any_sliding, t.sliding_period > 0);
  }
}

// Mixtral is architecture llama with expert keys; its files give no expert width (the experts
// are feed_forward_length wide, as llama.cpp reads them) and it always renormalizes.
TEST(ModelConfig, LlamaWithExpertCountIsMixtral) {
  ConfigFile f("llama");
  f.b.add_u32("llama.expert_count", 8);
  f.b.add_u32("llama.expert_used_count", 2);
  const ModelConfig c = f.read();
  EXPECT_EQ(c.n_experts, 8);
  EXPECT_EQ(c.n_experts_used, 2);
  EXPECT_EQ(c.n_ff_expert, 128);
  EXPECT_TRUE(c.expert_weights_norm);
  EXPECT_FALSE(c.rope_neox);
  ConfigFile dense("llama");
  EXPECT_EQ(dense.read().n_experts, 0);
}

// Each mixture-of-experts variant kiln does not run is refused by the key that marks it.
TEST(ModelConfig, RefusesMoeVariantsByTheirKeys) {
  struct Variant {
    const char* key;
    uint32_t value;
    const char* message;
  };
  const Variant variants[] = {
      {"expert_shared_count", 2, "shared experts"},
      {"expert_shared_feed_forward_length", 64, "shared experts"},
      {"expert_gating_func", 2, "expert gating function 2"},
      {"expert_group_count", 8, "group-limited expert routing"},
      {"leading_dense_block_count", 1, "leading_dense_block_count 1"},
  };
  for (const char* arch : {"llama", "qwen3moe"}) {
    for (const Variant& v : variants) {
      SCOPED_TRACE(std::string(arch) + " " + v.key);
      ConfigFile f(arch);
      const std::string p = std::string(arch) + ".";
      f.b.add_u32(p + "expert_count", 8);
      f.b.add_u32(p + "expert_used_count", 2);
      f.b.add_u32(p + v.key, v.value);
      expect_error_mentioning(f, v.message);
    }
  }
  // The plain values of the same keys are accepted.
  ConfigFile plain("llama");
  plain.b.add_u32("llama.expert_count", 8);
  plain.b.add_u32("llama.expert_used_count", 2);
  plain.b.add_u32("llama.expert_gating_func", 1);
  plain.b.add_u32("llama.expert_shared_count", 0);
  EXPECT_EQ(plain.read().n_experts, 8);
}

TEST(ModelConfig, RefusesPerExpertTensorsOfOldMixtralFiles) {
  ConfigFile f("llama");
  f.b.add_u32("llama.expert_count", 8);
  f.b.add_u32("llama.expert_used_count", 2);
  f.b.add_tensor("blk.0.ffn_gate.0.weight", kF32, {64, 128}, 64 * 128 * 4);
  expect_error_mentioning(f, "one tensor per expert");
}

TEST(ModelConfig, RefusesExpertsOnADenseArchitecture) {
  ConfigFile f("qwen3");
  f.b.add_u32("qwen3.expert_count", 8);
  expect_error_mentioning(f, "the qwen3 model has mixture-of-experts FFNs");
}

TEST(ModelConfig, KnownMoeFamiliesSayWhatTheyNeed) {
  ConfigFile f("qwen2moe");
  expect_error_mentioning(f, "unsupported architecture 'qwen2moe': a mixture-of-experts family");
  expect_error_mentioning(f, "shared expert");
  expect_error_mentioning(f, "qwen3moe");
}

// DeepSeek's YaRN: transformers' ramp for 8 rotary dimensions at base 1e4 over an original
// context of 64 (beta 32 / 1) runs from dimension pair 0 to 2: factors 1, 1 / (1/2 + 1/8), 4,
// 4; the attention scale gains mscale(4, mscale_all_dim)^2.
TEST(ModelConfig, DeepseekYarnFactorsAndAttentionScale) {
  const std::vector<float> f = yarn_rope_factors(8, 10000.0, 4.0, 64.0, 32.0, 1.0);
  ASSERT_EQ(f.size(), 4u);
  EXPECT_FLOAT_EQ(f[0], 1.0f);
  EXPECT_FLOAT_EQ(f[1], 1.6f);
  EXPECT_FLOAT_EQ(f[2], 4.0f);
  EXPECT_FLOAT_EQ(f[3], 4.0f);
  ConfigFile c("deepseek2");
  const std::string p = "deepseek2.";
  c.b.add_u32(p + "rope.dimension_count", 8);
  c.b.add_u32(p + "attention.key_length_mla", 24);
  c.b.add_u32(p + "attention.value_length_mla", 16);
  c.b.add_u32(p + "attention.kv_lora_rank", 32);
  c.b.add_u32(p + "expert_count", 8);
  c.b.add_u32(p + "expert_used_count", 2);
  c.b.add_u32(p + "expert_feed_forward_length", 32);
  c.b.add_string(p + "rope.scaling.type", "yarn");
  c.b.add_kv(p + "rope.scaling.factor", GgufType::F32, encode_scalar(4.0f));
  c.b.add_u32(p + "rope.scaling.original_context_length", 64);
  c.b.add_kv(p + "rope.scaling.yarn_log_multiplier", GgufType::F32, encode_scalar(0.0707f));
  const ModelConfig m = c.read();
  EXPECT_TRUE(m.mla && m.rope_freq_factors);
  EXPECT_EQ(m.head_dim, 24);
  EXPECT_EQ(m.qk_nope_dim, 16);
  EXPECT_EQ(m.n_kv_heads, m.n_heads);
  EXPECT_EQ(m.computed_rope_factors, f);
  const double mscale = 0.1 * 0.707 * std::log(4.0) + 1.0;
  EXPECT_NEAR(m.attention_scale, mscale * mscale / std::sqrt(24.0), 1e-6);
  ConfigFile linear("deepseek2");
  for (auto* file : {&linear}) {
    file->b.add_u32(p + "rope.dimension_count", 8);
    file->b.add_u32(p + "attention.key_length_mla", 24);
    file->b.add_u32(p + "attention.value_length_mla", 16);
    file->b.add_u32(p + "attention.kv_lora_rank", 32);
    file->b.add_u32(p + "expert_count", 8);
    file->b.add_u32(p + "expert_used_count", 2);
    file->b.add_string(p + "rope.scaling.type", "linear");
  }
  expect_error_mentioning(linear, "rope scaling 'linear' is not implemented for deepseek2");
}

// Command-R's logit_scale multiplies the logits; Command-R+ (08-2024)'s Q/K LayerNorms are
// refused by their tensor rather than run without.
TEST(ModelConfig, CommandRReadsLogitScaleAndRefusesQkNorms) {
  ConfigFile f("command-r");
  f.b.add_kv("command-r.logit_scale", GgufType::F32, encode_scalar(0.0625f));
  const ModelConfig c = f.read();
  EXPECT_DOUBLE_EQ(c.logit_multiplier, 0.0625);
  EXPECT_DOUBLE_EQ(c.logit_scale, 1.0);
  EXPECT_FALSE(c.rope_neox);
  ConfigFile plus("command-r");
  plus.b.add_tensor("blk.0.attn_q_norm.weight", kF32, {16, 4}, 16 * 4 * 4);
  expect_error_mentioning(plus, "Q/K norms");
}

TEST(ModelConfig, UnknownArchitectureNamesEveryRow) {
  ConfigFile f("bloom");
  for (const ArchitectureTraits& t : kArchitectures)
    expect_error_mentioning(f, std::string(t.arch));
}

}  // namespace
}  // namespace kiln::model
