// What distinguishes the architectures kiln runs, one row each, read by both config readers:
// the GGUF one (model_config.cc) and the Hugging Face one (hf_config.cc). Every architecture is
// the same decoder (transformer.h); a row says which of its options the family turns on and
// which defaults its files may leave out. An architecture that differs from these only in such
// traits is one row here (plus its Hugging Face class below) and its tests.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace kiln::model {

// Where an architecture's FFNs are mixtures of experts (expert_* keys, ffn_*_exps tensors).
enum class Experts : uint8_t {
  kNever,
  kAlways,
  // When the file says so: a Llama file with expert_count is Mixtral (llama.cpp's converter
  // writes Mixtral under architecture "llama"; Hugging Face: MixtralForCausalLM).
  kWhenKeyed,
};

// The FFN of an architecture whose FFN is not gated: ffn_down(act(ffn_up(x))), with this act.
enum class PlainFfn : uint8_t {
  kNone,      // gated: ffn_down(act(ffn_gate(x)) * ffn_up(x))
  kGeluTanh,  // StarCoder 2 ("gelu_pytorch_tanh")
  kGeluErf,   // Falcon (the exact GELU)
};

struct ArchitectureTraits {
  std::string_view arch;  // GGUF's general.architecture (kiln's name of the architecture)
  // GGUF files keep Q/K rows as NeoX halves (i, i + n/2). llama.cpp's converter permutes
  // Llama/Mistral rows into adjacent pairs instead; Hugging Face checkpoints are always halves.
  bool gguf_rope_neox;
  bool qkv_bias;  // biases on the Q, K and V projections
  bool qk_norm;   // per-head RMSNorm on Q and K
  // The Gemma block: post-attention and post-FFN norms, embeddings times sqrt(n_embd),
  // GELU (tanh), tied LM head by default, RMSNorm weights stored as w - 1 by Hugging Face.
  bool gemma;
  // Sliding-window attention (Gemma): the default layer period when the file gives none
  // (layer il slides unless il % period == period - 1; 0: no layer slides), the default window
  // (0: the file must give one), and whether local layers rotate with the global RoPE base
  // (else with 10000 unless the file says).
  int sliding_period;
  int default_sliding_window;
  bool local_rope_uses_global_base;
  // Gemma 2 caps attention logits (attn_logit_softcapping).
  bool attn_softcap;
  // LayerNorm (mean-centred; with the file's biases where it has them) instead of RMSNorm for
  // the block and final norms.
  bool layer_norm;
  PlainFfn plain_ffn;
  // Gemma scales queries by 1/sqrt(query_pre_attn_scalar), which GGUF files do not store: it is
  // n_embd / n_heads rather than head_dim for the model of this depth (the 27B), 0: never.
  int layers_scaled_by_embd_per_head;
  Experts experts;
  // One attn_qkv tensor and (a gated FFN) one gate+up tensor (Phi-3; Falcon's attention). GGUF
  // files may also store them split.
  bool fused_projections;
  // Attention and FFN both read the block's normed input and join the residual together:
  // x + attn(norm(x)) + ffn(norm(x)) (Command-R, Falcon).
  bool parallel_block;
};

// Field order: arch, gguf_rope_neox, qkv_bias, qk_norm, gemma, sliding_period,
// default_sliding_window, local_rope_uses_global_base, attn_softcap, layer_norm, plain_ffn,
// layers_scaled_by_embd_per_head, experts, fused_projections, parallel_block (one-byte fields
// placed so that the struct has no padding to spare).
inline constexpr ArchitectureTraits kArchitectures[] = {
    {"llama", false, false, false, false, 0, 0, false, false, false, PlainFfn::kNone, 0,
     Experts::kWhenKeyed, false, false},
    {"mistral", false, false, false, false, 0, 0, false, false, false, PlainFfn::kNone, 0,
     Experts::kNever, false, false},
    {"qwen2", true, true, false, false, 0, 0, false, false, false, PlainFfn::kNone, 0,
     Experts::kNever, false, false},
    {"qwen3", true, false, true, false, 0, 0, false, false, false, PlainFfn::kNone, 0,
     Experts::kNever, false, false},
    {"qwen3moe", true, false, true, false, 0, 0, false, false, false, PlainFfn::kNone, 0,
     Experts::kAlways, false, false},
    {"gemma2", true, false, false, true, 2, 4096, true, true, false, PlainFfn::kNone, 46,
     Experts::kNever, false, false},
    {"gemma3", true, false, true, true, 6, 0, false, false, false, PlainFfn::kNone, 62,
     Experts::kNever, false, false},
    {"phi3", true, false, false, false, 0, 0, false, false, false, PlainFfn::kNone, 0,
     Experts::kNever, true, false},
    // DeepSeek V2/V3: multi-head latent attention and DeepSeek's routing, read by
    // deepseek_config.h beyond this row (adjacent-pair RoPE, kept so by the converter).
    {"deepseek2", false, false, false, false, 0, 0, false, false, false, PlainFfn::kNone, 0,
     Experts::kAlways, false, false},
    // Granite (3.x dense): Llama with multipliers (model_config.h), read beyond this row.
    {"granite", false, false, false, false, 0, 0, false, false, false, PlainFfn::kNone, 0,
     Experts::kNever, false, false},
    // OLMo 2: norms after the attention and the FFN instead of before, Q/K RMSNorm over the
    // whole projection (apply_architecture_traits).
    {"olmo2", true, false, false, false, 0, 0, false, false, false, PlainFfn::kNone, 0,
     Experts::kNever, false, false},
    // gpt-oss: even layers slide (the file gives the window), attention sinks, biases on every
    // projection, YaRN without truncation, gpt-oss's routing and clamped SwiGLU experts
    // (read_gpt_oss in model_config.cc).
    {"gpt-oss", true, true, false, false, 2, 0, true, false, false, PlainFfn::kNone, 0,
     Experts::kAlways, false, false},
    // StarCoder 2: LayerNorm with biases, biases on every projection, GELU (tanh) FFN without
    // a gate; NeoX RoPE. Its sliding window is not in GGUF files (llama.cpp applies none).
    {"starcoder2", true, true, false, false, 0, 0, false, false, true, PlainFfn::kGeluTanh, 0,
     Experts::kNever, false, false},
    // Command-R (v01, Aya 23, 08-2024): the parallel block, LayerNorm without biases, logits
    // times logit_scale (model_config.h), tied embeddings; adjacent-pair RoPE in both formats
    // (Cohere's rotate_half interleaves, and the converter keeps its rows).
    {"command-r", false, false, false, false, 0, 0, false, false, true, PlainFfn::kNone, 0,
     Experts::kNever, false, true},
    // Falcon (7B: one LayerNorm, multi-query; 40B/180B: ln_attn and ln_mlp, grouped queries):
    // the parallel block, LayerNorm with biases, one fused attn_qkv, an FFN without a gate and
    // the exact GELU (transformers' "gelu"; llama.cpp uses the tanh form), NeoX RoPE.
    {"falcon", true, false, false, false, 0, 0, false, false, true, PlainFfn::kGeluErf, 0,
     Experts::kNever, true, true},
};

// A Hugging Face config's class and model_type, and the architecture row it loads as.
struct HfArchitecture {
  std::string_view hf_class;
  std::string_view model_type;
  std::string_view arch;
};

// Mistral and Mixtral convert to GGUF architecture "llama" (same tensors, same graph; Mixtral
// with expert FFNs).
inline constexpr HfArchitecture kHfArchitectures[] = {
    {"LlamaForCausalLM", "llama", "llama"},
    {"MistralForCausalLM", "mistral", "llama"},
    {"Qwen2ForCausalLM", "qwen2", "qwen2"},
    {"Qwen3ForCausalLM", "qwen3", "qwen3"},
    {"Qwen3MoeForCausalLM", "qwen3_moe", "qwen3moe"},
    {"Gemma2ForCausalLM", "gemma2", "gemma2"},
    {"Gemma3ForCausalLM", "gemma3_text", "gemma3"},
    {"Phi3ForCausalLM", "phi3", "phi3"},
    {"MixtralForCausalLM", "mixtral", "llama"},
    {"DeepseekV2ForCausalLM", "deepseek_v2", "deepseek2"},
    {"DeepseekV3ForCausalLM", "deepseek_v3", "deepseek2"},
    {"GraniteForCausalLM", "granite", "granite"},
    {"Olmo2ForCausalLM", "olmo2", "olmo2"},
    {"GptOssForCausalLM", "gpt_oss", "gpt-oss"},
    {"Starcoder2ForCausalLM", "starcoder2", "starcoder2"},
    {"CohereForCausalLM", "cohere", "command-r"},
    {"FalconForCausalLM", "falcon", "falcon"},
};

// The row of `arch`, or null when kiln does not run it.
constexpr const ArchitectureTraits* find_architecture(std::string_view arch) {
  for (const ArchitectureTraits& t : kArchitectures)
    if (t.arch == arch) return &t;
  return nullptr;
}

// The row of `arch`; throws kiln::Error naming the architectures kiln runs.
const ArchitectureTraits& architecture_traits(std::string_view arch);

// "gemma2, gemma3, ..." and "LlamaForCausalLM, ...", for refusals.
std::string supported_architectures();
std::string supported_hf_classes();

}  // namespace kiln::model
