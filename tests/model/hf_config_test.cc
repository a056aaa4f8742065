// config.json -> ModelConfig: on every oracle case it equals what read_model_config() gives for
// llama.cpp's conversion of the same checkpoint (but for the RoPE layout of Llama/Mistral,
// which HF keeps in NeoX order), the Llama 3 factors equal the converter's rope_freqs tensor,
// and what kiln cannot run is refused in one line.
#include "kiln/model/hf_config.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <utility>

#include "kiln/base/error.h"
#include "kiln/model/architecture_traits.h"
#include "kiln/model/gguf.h"

namespace kiln::model {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path oracle_dir() { return fs::path(KILN_SOURCE_DIR) / "tests" / "oracle" / "data"; }

json read_json(const fs::path& p) { return json::parse(std::ifstream(p)); }

std::string error_of(const json& config) {
  try {
    model_config_from_hf(config);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

class HfConfigVsGguf : public ::testing::TestWithParam<std::string> {};

TEST_P(HfConfigVsGguf, SameConfigAsConversion) {
  const fs::path dir = oracle_dir() / GetParam();
  const HfModelConfig hf = model_config_from_hf(read_json(dir / "hf" / "config.json"));
  const ModelConfig& h = hf.config;
  const ModelConfig g = read_model_config(*GgufFile::open((dir / "model.f32.gguf").string()));
  EXPECT_EQ(h.arch, g.arch);
  EXPECT_EQ(h.n_layers, g.n_layers);
  EXPECT_EQ(h.n_embd, g.n_embd);
  if (h.n_experts == 0) {
    EXPECT_EQ(h.n_ff, g.n_ff);
  }
  EXPECT_EQ(h.n_heads, g.n_heads);
  EXPECT_EQ(h.n_kv_heads, g.n_kv_heads);
  EXPECT_EQ(h.head_dim, g.head_dim);
  EXPECT_EQ(h.n_rot, g.n_rot);
  EXPECT_EQ(h.vocab, g.vocab);
  EXPECT_EQ(h.context_length, g.context_length);
  EXPECT_FLOAT_EQ(h.rms_eps, g.rms_eps);
  // The converter permutes Llama's Q/K rows into the normal layout; HF rows are NeoX, but for
  // DeepSeek and Command-R, which rotate adjacent pairs and whose rows the converter keeps.
  EXPECT_EQ(h.rope_neox, !h.mla && h.arch != "command-r");
  EXPECT_EQ(h.rope_freq_factors, g.rope_freq_factors);
  EXPECT_EQ(h.qkv_bias, g.qkv_bias);
  EXPECT_EQ(h.qk_norm, g.qk_norm);
  EXPECT_EQ(h.post_norms, g.post_norms);
  EXPECT_EQ(h.pre_norms, g.pre_norms);
  EXPECT_EQ(h.qk_norm_full, g.qk_norm_full);
  EXPECT_EQ(h.layer_norm, g.layer_norm);
  EXPECT_EQ(h.gated_ffn, g.gated_ffn);
  EXPECT_EQ(h.parallel_block, g.parallel_block);
  EXPECT_FLOAT_EQ(h.logit_multiplier, g.logit_multiplier);
  EXPECT_EQ(h.scale_embeddings, g.scale_embeddings);
  EXPECT_EQ(h.tied_output, g.tied_output);
  EXPECT_EQ(h.fused_qkv, g.fused_qkv);
  EXPECT_EQ(h.fused_gate_up, g.fused_gate_up);
  EXPECT_EQ(h.activation, g.activation);
  EXPECT_FLOAT_EQ(h.attention_scale, g.attention_scale);
  EXPECT_FLOAT_EQ(h.attn_logit_softcap, g.attn_logit_softcap);
  EXPECT_FLOAT_EQ(h.final_logit_softcap, g.final_logit_softcap);
  EXPECT_EQ(h.n_experts, g.n_experts);
  EXPECT_EQ(h.n_experts_used, g.n_experts_used);
  EXPECT_EQ(h.n_ff_expert, g.n_ff_expert);
  EXPECT_EQ(h.expert_weights_norm, g.expert_weights_norm);
  EXPECT_EQ(h.expert_sigmoid, g.expert_sigmoid);
  EXPECT_EQ(h.expert_groups, g.expert_groups);
  EXPECT_EQ(h.expert_groups_used, g.expert_groups_used);
  EXPECT_FLOAT_EQ(h.expert_weights_scale, g.expert_weights_scale);
  EXPECT_EQ(h.n_dense_lead, g.n_dense_lead);
  EXPECT_EQ(h.n_ff_shared, g.n_ff_shared);
  EXPECT_EQ(h.mla, g.mla);
  EXPECT_FLOAT_EQ(h.embedding_scale, g.embedding_scale);
  EXPECT_FLOAT_EQ(h.residual_scale, g.residual_scale);
  EXPECT_FLOAT_EQ(h.logit_scale, g.logit_scale);
  EXPECT_EQ(h.q_lora_rank, g.q_lora_rank);
  EXPECT_EQ(h.kv_lora_rank, g.kv_lora_rank);
  EXPECT_EQ(h.qk_nope_dim, g.qk_nope_dim);
  EXPECT_EQ(h.v_head_dim, g.v_head_dim);
  EXPECT_EQ(h.attn_sinks, g.attn_sinks);
  EXPECT_EQ(h.moe_softmax_topk, g.moe_softmax_topk);
  EXPECT_FLOAT_EQ(h.swiglu_alpha, g.swiglu_alpha);
  EXPECT_FLOAT_EQ(h.swiglu_limit, g.swiglu_limit);
  EXPECT_EQ(h.ffn_norm, g.ffn_norm);
  ASSERT_EQ(h.computed_rope_factors.size(), g.computed_rope_factors.size());
  for (size_t i = 0; i < h.computed_rope_factors.size(); ++i)
    EXPECT_FLOAT_EQ(h.computed_rope_factors[i], g.computed_rope_factors[i]) << "factor " << i;
  ASSERT_EQ(h.layers.size(), g.layers.size());
  for (size_t il = 0; il < h.layers.size(); ++il) {
    EXPECT_EQ(h.layers[il].sliding, g.layers[il].sliding) << "layer " << il;
    EXPECT_EQ(h.layers[il].window, g.layers[il].window) << "layer " << il;
    EXPECT_FLOAT_EQ(h.layers[il].rope_base, g.layers[il].rope_base) << "layer " << il;
  }
  EXPECT_EQ(hf.gemma_norm_offset, g.arch == "gemma2" || g.arch == "gemma3");
}

std::vector<std::string> cases() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(oracle_dir())) {
    if (e.is_directory()) out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

INSTANTIATE_TEST_SUITE_P(Oracle, HfConfigVsGguf, ::testing::ValuesIn(cases()),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s)
                             c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return s;
                         });

// Command-R+ (08-2024)'s Q/K LayerNorms are refused by their key rather than run without.
TEST(HfConfig, CommandRWithQkNormIsRefused) {
  json c = read_json(oracle_dir() / "command-r" / "hf" / "config.json");
  EXPECT_EQ(error_of(c), "(no error)");
  c["use_qk_norm"] = true;
  EXPECT_NE(error_of(c).find("use_qk_norm"), std::string::npos) << error_of(c);
}

// The Falcon variants kiln does not run (ALiBi, biased projections, sequential blocks) are
// refused by the key that marks them.
TEST(HfConfig, FalconVariantsAreRefusedByTheirKeys) {
  const json base = read_json(oracle_dir() / "falcon-7b" / "hf" / "config.json");
  EXPECT_EQ(error_of(base), "(no error)");
  for (const char* key : {"alibi", "bias"}) {
    json c = base;
    c[key] = true;
    EXPECT_NE(error_of(c).find(std::string("(") + key + ")"), std::string::npos) << error_of(c);
  }
  json sequential = base;
  sequential["parallel_attn"] = false;
  EXPECT_NE(error_of(sequential).find("parallel_attn"), std::string::npos);
}

TEST(HfConfig, Llama3FactorsEqualTheConvertersTensor) {
  const fs::path dir = oracle_dir() / "llama3-rope";
  const HfModelConfig hf = model_config_from_hf(read_json(dir / "hf" / "config.json"));
  auto file = GgufFile::open((dir / "model.f32.gguf").string());
  const Tensor t = file->tensor(kRopeFreqsTensor);
  ASSERT_EQ(static_cast<int64_t>(hf.rope_freq_factors.size()), t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) {
    EXPECT_FLOAT_EQ(hf.rope_freq_factors[i], t.data_as<float>()[i]) << "factor " << i;
  }
}

json llama() {
  return json::parse(R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 512,
    "rms_norm_eps": 1e-5, "vocab_size": 100, "rope_theta": 500000.0,
    "tie_word_embeddings": false})");
}

// Projection biases are read only where the architecture has them (Qwen 2's QKV); elsewhere a
// config that declares them is refused rather than run without them.
TEST(HfConfig, RefusesBiasesTheArchitectureDoesNotHave) {
  for (const auto& [hf_class, model_type] :
       {std::pair{"LlamaForCausalLM", "llama"}, std::pair{"Qwen3ForCausalLM", "qwen3"},
        std::pair{"Phi3ForCausalLM", "phi3"}}) {
    for (const char* key : {"attention_bias", "mlp_bias"}) {
      json c = llama();
      c["architectures"] = {hf_class};
      c["model_type"] = model_type;
      EXPECT_NO_THROW(model_config_from_hf(c)) << hf_class;
      c[key] = true;
      EXPECT_NE(error_of(c).find("attention_bias / mlp_bias are not supported"), std::string::npos)
          << hf_class << " " << key << ": " << error_of(c);
    }
  }
  json qwen2 = llama();
  qwen2["architectures"] = {"Qwen2ForCausalLM"};
  qwen2["model_type"] = "qwen2";
  qwen2["attention_bias"] = true;
  EXPECT_TRUE(model_config_from_hf(qwen2).config.qkv_bias);
}

TEST(HfConfig, TransformersFourKeys) {
  json c = llama();
  c["rope_scaling"] = {{"rope_type", "llama3"},
                       {"factor", 8.0},
                       {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0},
                       {"original_max_position_embeddings", 8192}};
  const HfModelConfig h = model_config_from_hf(c);
  EXPECT_EQ(h.config.head_dim, 16);
  EXPECT_DOUBLE_EQ(h.config.layers[0].rope_base, 500000.0);
  ASSERT_EQ(h.rope_freq_factors.size(), 8u);
  EXPECT_FLOAT_EQ(h.rope_freq_factors[0], 1.0f);  // the fastest frequency is kept
  EXPECT_FLOAT_EQ(h.rope_freq_factors[7], 8.0f);  // the slowest is divided by `factor`
}

// Found by fuzz/hf_config_fuzzer: values that do not fit the int they are stored in were
// truncated (a huge partial_rotary_factor was undefined behaviour converting to int), and a layer
// count of two billion sized the per-layer table (an out-of-memory abort instead of an error).
TEST(HfConfig, RefusesOutOfRangeValues) {
  json c = llama();
  c["num_hidden_layers"] = 2000000000;
  EXPECT_NE(error_of(c).find("num_hidden_layers 2000000000 is more than kiln supports"),
            std::string::npos)
      << error_of(c);
  c = llama();
  c["hidden_size"] = int64_t{1} << 40;
  EXPECT_NE(error_of(c).find("'hidden_size' = 1099511627776 is out of range"), std::string::npos)
      << error_of(c);
  c = llama();
  c["num_attention_heads"] = int64_t{1} << 32;  // would truncate to 0
  EXPECT_NE(error_of(c).find("'num_attention_heads' = 4294967296 is out of range"),
            std::string::npos)
      << error_of(c);
  c = llama();
  c["partial_rotary_factor"] = 1e300;
  EXPECT_NE(error_of(c).find("partial_rotary_factor 1e+300 must be in (0, 1]"), std::string::npos)
      << error_of(c);
  c = llama();
  c["model_type"] = "gemma3_text";
  c["architectures"] = {"Gemma3ForCausalLM"};
  c["query_pre_attn_scalar"] = -1;
  EXPECT_NE(error_of(c).find("'query_pre_attn_scalar' must be positive"), std::string::npos)
      << error_of(c);
}

TEST(HfConfig, RefusesUnknownArchitectures) {
  json c = llama();
  c["architectures"] = {"GPTNeoXForCausalLM"};
  EXPECT_NE(error_of(c).find("unsupported architecture 'GPTNeoXForCausalLM'"), std::string::npos)
      << error_of(c);
  c.erase("architectures");
  c["model_type"] = "gpt_neox";
  EXPECT_NE(error_of(c).find("unsupported architecture"), std::string::npos);
  c = llama();
  c["model_type"] = "qwen2";
  EXPECT_NE(error_of(c).find("does not match"), std::string::npos) << error_of(c);
}

// Both readers share the architecture table: every Hugging Face class loads as one of its rows,
// and every row (but Mistral's, which converts to "llama") can be loaded from some class.
TEST(HfConfig, ClassesAndArchitectureRowsCorrespond) {
  for (const HfArchitecture& h : kHfArchitectures) {
    EXPECT_NE(find_architecture(h.arch), nullptr) << h.hf_class;
  }
  for (const ArchitectureTraits& t : kArchitectures) {
    int classes = 0;
    for (const HfArchitecture& h : kHfArchitectures) classes += h.arch == t.arch ? 1 : 0;
    EXPECT_EQ(classes > 0, t.arch != "mistral") << t.arch;
  }
  json c = llama();
  c["architectures"] = {"GPTNeoXForCausalLM"};
  for (const HfArchitecture& h : kHfArchitectures) {
    EXPECT_NE(error_of(c).find(h.hf_class), std::string::npos) << error_of(c);
  }
}

TEST(HfConfig, RefusesRopeScalingsKilnDoesNotImplement) {
  for (const char* type : {"linear", "dynamic", "yarn", "longrope"}) {
    json c = llama();
    c["rope_scaling"] = {{"rope_type", type}, {"factor", 4.0}};
    EXPECT_NE(error_of(c).find(std::string("rope scaling '") + type + "' is not implemented"),
              std::string::npos)
        << error_of(c);
  }
  json c = llama();
  c["rope_scaling"] = {{"type", "llama3"}, {"factor", 8.0}};  // parameters missing
  EXPECT_NE(error_of(c).find("llama3 rope scaling needs '"), std::string::npos) << error_of(c);
}

TEST(HfConfig, RefusesMissingOrMistypedKeys) {
  json c = llama();
  c.erase("hidden_size");
  EXPECT_NE(error_of(c).find("'hidden_size' must be an integer"), std::string::npos);
  c = llama();
  c["num_key_value_heads"] = 3;
  EXPECT_NE(error_of(c).find("not a multiple"), std::string::npos);
  c = llama();
  c["hidden_act"] = "gelu";
  EXPECT_NE(error_of(c).find("activation 'gelu'"), std::string::npos);
}

TEST(HfConfig, Qwen3MoeDenseLayersRefused) {
  json c = read_json(oracle_dir() / "qwen3moe" / "hf" / "config.json");
  c["mlp_only_layers"] = {0};
  EXPECT_NE(error_of(c).find("mlp_only_layers"), std::string::npos) << error_of(c);
}

// Mixtral loads as the llama row with experts intermediate_size wide, always renormalized.
TEST(HfConfig, MixtralIsLlamaWithExperts) {
  json c = llama();
  c["architectures"] = {"MixtralForCausalLM"};
  c["model_type"] = "mixtral";
  c["num_local_experts"] = 8;
  c["num_experts_per_tok"] = 2;
  c["norm_topk_prob"] = false;  // not read by Mixtral: it always renormalizes
  const ModelConfig m = model_config_from_hf(c).config;
  EXPECT_EQ(m.arch, "llama");
  EXPECT_EQ(m.n_experts, 8);
  EXPECT_EQ(m.n_experts_used, 2);
  EXPECT_EQ(m.n_ff_expert, c["intermediate_size"].get<int>());
  EXPECT_TRUE(m.expert_weights_norm);
  EXPECT_EQ(model_config_from_hf(llama()).config.n_experts, 0);
}

TEST(HfConfig, RefusesExpertsOnDenseClassesAndSharedExperts) {
  json c = llama();
  c["num_local_experts"] = 8;
  EXPECT_NE(error_of(c).find("LlamaForCausalLM with mixture-of-experts"), std::string::npos)
      << error_of(c);
  c = read_json(oracle_dir() / "qwen3moe" / "hf" / "config.json");
  c["shared_expert_intermediate_size"] = 64;
  EXPECT_NE(error_of(c).find("shared experts"), std::string::npos) << error_of(c);
}

TEST(HfConfig, GemmaSlidingPatternWithoutLayerTypes) {
  json c = read_json(oracle_dir() / "gemma3" / "hf" / "config.json");
  c.erase("layer_types");
  c["sliding_window_pattern"] = 3;
  const HfModelConfig h = model_config_from_hf(c);
  EXPECT_TRUE(h.config.layers[0].sliding);
  EXPECT_FALSE(h.config.layers[2].sliding);
  EXPECT_DOUBLE_EQ(h.config.layers[2].rope_base, 1000000.0);
  EXPECT_DOUBLE_EQ(h.config.layers[0].rope_base, 10000.0);
}

}  // namespace
}  // namespace kiln::model
