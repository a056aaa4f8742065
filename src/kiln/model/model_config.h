// The hyper-parameters of a decoder-only transformer, read from GGUF metadata. One struct
// covers gemma3 and the llama family (llama, mistral, qwen2, qwen3): architectures differ
// only in the flags below, so the forward pass is written once (transformer.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::model {

class GgufFile;

enum class Activation { GeluTanh, Silu };

struct LayerConfig {
  bool sliding = false;  // local (sliding-window) attention layer
  int window = 0;        // 0: full causal attention
  double rope_base = 10000.0;
};

struct ModelConfig {
  std::string arch;
  int n_layers = 0;
  int n_embd = 0;
  int n_ff = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int64_t vocab = 0;
  int64_t context_length = 0;
  double rms_eps = 1e-6;
  bool rope_neox = false;         // rotate halves (NeoX) vs adjacent pairs (normal)
  bool qkv_bias = false;          // qwen2
  bool qk_norm = false;           // gemma3, qwen3: per-head RMSNorm on Q and K before RoPE
  bool post_norms = false;        // gemma3: post_attention_norm and post_ffw_norm
  bool scale_embeddings = false;  // gemma3: embeddings times sqrt(n_embd)
  bool tied_output = false;       // no output.weight: the LM head is token_embd
  Activation activation = Activation::Silu;
  double attention_scale = 0;      // 1/sqrt(head_dim) unless the file says otherwise
  double final_logit_softcap = 0;  // 0: none
  std::vector<LayerConfig> layers;
};

// Reads and validates the config; throws kiln::Error naming the missing/invalid key or the
// unsupported architecture / rope scaling.
ModelConfig read_model_config(const GgufFile& file);

}  // namespace kiln::model
