// The hyper-parameters of a decoder-only transformer, read from GGUF metadata. One struct
// covers every supported architecture (gemma2, gemma3, llama (with Mixtral), mistral, qwen2,
// qwen3, phi3, qwen3moe): they differ only in the flags below, so the forward pass is written once
// (transformer.h). Each flag is set the way llama.cpp's loader reads the same file, and each
// architecture is checked against Hugging Face transformers (tests/oracle).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::model {

class GgufFile;
struct ArchitectureTraits;

enum class Activation { GeluTanh, Silu, GeluErf };

struct LayerConfig {
  bool sliding = false;  // local (sliding-window) attention layer
  int window = 0;        // 0: full causal attention
  double rope_base = 10000.0;
};

// The tensor that carries Llama 3.1/3.2's per-dimension RoPE frequency factors.
inline constexpr const char* kRopeFreqsTensor = "rope_freqs.weight";
// Under tensor parallelism the LM head is this name: a rank's vocabulary rows of output.weight
// or, with tied embeddings, of token_embd.weight (whose full table the embedding still reads).
inline constexpr const char* kTpLmHeadTensor = "tp.lm_head";

struct ModelConfig {
  std::string arch;
  int n_layers = 0;
  int n_embd = 0;
  int n_ff = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int n_rot = 0;  // rotary dimensions of a head (< head_dim: partial rotary, e.g. Phi-4-mini)
  int64_t vocab = 0;
  int64_t context_length = 0;
  double rms_eps = 1e-6;   // the epsilon of every norm (LayerNorm's where layer_norm is set)
  bool rope_neox = false;  // rotate halves (NeoX) vs adjacent pairs (normal)
  bool rope_freq_factors = false;  // the file has kRopeFreqsTensor (llama3 rope scaling)
  bool qkv_bias = false;           // qwen2
  bool qk_norm = false;            // gemma3, qwen3, qwen3moe: per-head RMSNorm on Q and K
  bool post_norms = false;         // gemma2/3, olmo2: post_attention_norm and post_ffw_norm
  bool pre_norms = true;           // attn_norm and ffn_norm (olmo2 has none)
  bool qk_norm_full = false;       // olmo2: RMSNorm over the whole Q and K projections
  bool scale_embeddings = false;   // gemma2/3: embeddings times sqrt(n_embd)
  bool tied_output = false;        // no output.weight: the LM head is token_embd
  bool fused_qkv = false;          // phi3: one attn_qkv tensor (rows q, then k, then v)
  bool fused_gate_up = false;      // phi3: ffn_up holds gate rows then up rows (2 * n_ff)
  Activation activation = Activation::Silu;
  // The block's form (architecture_traits.h): LayerNorm for the block and final norms, with
  // the file's biases where it has them (starcoder2, command-r, falcon); an FFN without a gate,
  // ffn_down(act(ffn_up)) with the projections' biases where the file has them (starcoder2,
  // falcon); attention and FFN reading one normed input (falcon 40B: the attention its own,
  // attn_norm_2), both added to the residual at once (command-r, falcon).
  bool layer_norm = false;
  bool gated_ffn = true;
  bool parallel_block = false;
  double attention_scale = 0;      // 1/sqrt(head_dim) unless the architecture says otherwise
  double attn_logit_softcap = 0;   // gemma2: cap * tanh(score / cap) before softmax; 0: none
  double final_logit_softcap = 0;  // 0: none
  // Granite's multipliers: embeddings times embedding_scale, each layer's attention and FFN
  // outputs times residual_scale before their residual add, logits divided by logit_scale.
  double embedding_scale = 1.0;
  double residual_scale = 1.0;
  double logit_scale = 1.0;
  // Command-R multiplies its logits by its logit_scale (0.0625 in v01), where Granite divides.
  double logit_multiplier = 1.0;
  // Mixture of experts (qwen3moe, Mixtral): every layer's FFN routes each token to n_experts_used
  // of n_experts experts of width n_ff_expert, weighted by the renormalized router softmax.
  int n_experts = 0;
  int n_experts_used = 0;
  int n_ff_expert = 0;
  bool expert_weights_norm = true;  // renormalize the chosen experts' weights to sum to 1
  // DeepSeek's routing (kernels/moe_ffn.h): sigmoid scores (V3; else softmax), group-limited
  // top-k (expert_groups > 1), weights times expert_weights_scale (routed_scaling_factor); the
  // first n_dense_lead layers have a dense FFN of n_ff; the others add shared experts of width
  // n_ff_shared (0: none) to the routed ones.
  bool expert_sigmoid = false;
  int expert_groups = 1;
  int expert_groups_used = 1;
  double expert_weights_scale = 1.0;
  int n_dense_lead = 0;
  int n_ff_shared = 0;
  // DeepSeek's multi-head latent attention (deepseek2; model/mla_tensors.h): Q from x (or from
  // x through a rank-q_lora_rank bottleneck and its norm), K/V decompressed from a rank
  // kv_lora_rank latent (after its norm) plus one rotary key shared by the heads. Each head is
  // head_dim = qk_nope_dim + n_rot wide, its rotary dimensions first; V's v_head_dim values are
  // padded to head_dim with zeros.
  bool mla = false;
  int q_lora_rank = 0;  // 0: Q is projected from x directly
  int kv_lora_rank = 0;
  int qk_nope_dim = 0;
  int v_head_dim = 0;
  // RoPE frequency factors computed from the config (YaRN), served as kRopeFreqsTensor when the
  // file has none (mla_tensors.h); empty: none.
  std::vector<float> computed_rope_factors;
  // gpt-oss: per-head attention sinks (blk.N.attn_sinks.weight, kernels/attention.h); experts
  // chosen by their logits and weighted by the softmax of those alone; the clamped SwiGLU with
  // swiglu_alpha and swiglu_limit (> 0; kernels/moe_ffn.h); biases on the router and experts
  // (when the file has them); the pre-FFN norm's tensor name (gpt-oss's converter names it
  // post_attention_norm).
  bool attn_sinks = false;
  bool moe_softmax_topk = false;
  double swiglu_alpha = 0;
  double swiglu_limit = 0;
  std::string ffn_norm = "ffn_norm";
  // Tensor parallelism (tensor_parallel.h): > 1 when this config is one rank's part of the
  // model (n_heads, n_kv_heads and n_ff are then the rank's; vocab stays the whole one).
  int tp_size = 1;
  std::vector<LayerConfig> layers;
};

// Sets what an architecture's row (architecture_traits.h) decides alone, for both readers: the
// projection and norm options and the activation. rope_neox is left to the reader (it depends
// on the file format), and so are the traits that need the file's keys.
void apply_architecture_traits(const ArchitectureTraits& traits, ModelConfig& c);

// gpt-oss's YaRN for the layers' base `theta`: frequency factors and the attention scale times
// mscale^2 (transformers scales cos and sin by mscale, so q.k by its square). gpt-oss's
// config.json turns off the truncation of the ramp's ends (it was trained so); GGUF files do
// not say, and are read with gpt-oss's value.
void set_gpt_oss_yarn(ModelConfig& c, double theta, double factor, double original_context,
                      double beta_fast, double beta_slow, bool truncate);

// Reads and validates the config; throws kiln::Error naming the missing/invalid key or the
// unsupported architecture / rope scaling.
ModelConfig read_model_config(const GgufFile& file);

}  // namespace kiln::model
