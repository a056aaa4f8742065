// A Hugging Face config.json as kiln's ModelConfig, for every architecture kiln reads from GGUF.
// The result equals what read_model_config() gives for the file llama.cpp's converter makes
// from the same checkpoint, except where the weights themselves differ (docs/models.md,
// "Hugging Face directories"): Llama/Mistral Q/K rows are in NeoX order in HF checkpoints, so
// they run with NeoX RoPE instead of being permuted; Gemma's norm weights lack the +1 that the
// converter folds in (hf_tensor_source adds it at load).
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kiln/model/model_config.h"

namespace kiln::model {

struct HfModelConfig {
  ModelConfig config;
  std::string model_type;          // config.json's model_type ("gemma3_text", "qwen3_moe", ...)
  bool gemma_norm_offset = false;  // norm weights w are applied as (1 + w)
  // Llama 3 rope scaling: the per-dimension frequency divisors GGUF files carry as
  // kRopeFreqsTensor (n_rot / 2 values), computed from rope_scaling as the converter does.
  std::vector<float> rope_freq_factors;
};

// Throws kiln::Error with one line naming the missing/invalid key, the unsupported
// architecture or the unsupported RoPE scaling.
HfModelConfig model_config_from_hf(const nlohmann::json& config);

// The factors of Llama 3 rope scaling for `n_rot` rotary dimensions at base `theta`.
std::vector<float> llama3_rope_factors(int n_rot, double theta, double factor,
                                       double low_freq_factor, double high_freq_factor,
                                       double original_context);

}  // namespace kiln::model
