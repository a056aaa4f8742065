// DeepSeek V2/V3 (GGUF architecture deepseek2; Hugging Face DeepseekV2ForCausalLM and
// DeepseekV3ForCausalLM): what their configs add to ModelConfig. Multi-head latent attention's
// dimensions (model_config.h, "mla"), YaRN RoPE with DeepSeek's attention scale, leading dense
// layers, shared experts and the routing of either generation (kernels/moe_ffn.h). Both readers
// call these after reading the fields every architecture has; the GGUF keys are the ones
// llama.cpp's converter writes, and the Hugging Face ones are read as transformers reads them.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kiln/model/model_config.h"

namespace kiln::model {

class GgufFile;

// YaRN's per-dimension frequency divisors for `n_rot` rotary dimensions at base `theta` (the
// kRopeFreqsTensor convention: frequency i is theta^(-2i/n_rot) / factor_i): 1 for the fast
// dimensions (more than beta_fast rotations over the original context), `factor` for the slow
// ones (fewer than beta_slow), a linear ramp between, as transformers computes them (with its
// default truncation of the ramp's ends to whole dimensions; gpt-oss's config turns it off).
std::vector<float> yarn_rope_factors(int n_rot, double theta, double factor,
                                     double original_context, double beta_fast, double beta_slow,
                                     bool truncate = true);

// YaRN's magnitude scale 0.1 * mscale * ln(factor) + 1 (1 when factor <= 1).
double yarn_mscale(double factor, double mscale);

// Head dimensions of a deepseek2 file (key_length_mla, value_length_mla, q/kv lora ranks); sets
// head_dim, n_rot, n_kv_heads (= n_heads: K/V are decompressed per head) and the MLA fields.
void read_deepseek2_dims(const GgufFile& file, const std::string& prefix, ModelConfig& c);

// The rest of a deepseek2 file, after the generic reader: RoPE (none or YaRN), the attention
// scale, dense leading layers, shared experts and the routing keys.
void read_deepseek2_rest(const GgufFile& file, const std::string& prefix, ModelConfig& c);

// A DeepSeek V2/V3 config.json, after the dimensions every architecture has (layers, width,
// heads, vocabulary). `v3`: DeepseekV3ForCausalLM (sigmoid routing with score bias); V2 routes
// by softmax, greedy or group-limited.
void read_deepseek_hf(const nlohmann::json& config, bool v3, ModelConfig& c);

}  // namespace kiln::model
