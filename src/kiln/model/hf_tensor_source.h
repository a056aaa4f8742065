// The tensors of a Hugging Face checkpoint (one or more safetensors files) under the GGUF names
// the forward pass asks for. Most are the stored bytes, borrowed from the memory map; a few
// are made at load because the layouts differ (docs/models.md, "Hugging Face directories"):
//  - Vectors (norm weights, biases) in BF16/F16: served as f32, as GGUF files store them.
//  - Gemma norm weights: HF stores w of (1 + w), GGUF stores 1 + w; served as f32 with +1.
//  - Qwen3-MoE experts: HF stores one matrix per expert, GGUF one [experts, rows, cols] tensor;
//    stacked when asked for (only the weight packer asks, once, and keeps its packed copy).
//  - `--quantize q8_0|q4_0`: matrices (not the MoE router) are quantized when asked for, or
//    made F16 where rows are not whole blocks (as llama.cpp's converter does).
//  - Llama 3 rope scaling: the frequency factors GGUF stores as rope_freqs.weight, computed
//    from config.json.
//  - gpt-oss experts: HF stores gate and up interleaved (columns 2f and 2f + 1 of gate_up_proj,
//    [experts, embd, 2 * ff]) and down as [experts, ff, embd]; GGUF stores separate gate and up
//    [experts, ff, embd] and down [experts, embd, ff]: rearranged (in f32) when asked for.
//    OpenAI's checkpoints keep them in MXFP4 (*_blocks [experts, rows, blocks, 16] with two
//    codes a byte, *_scales [experts, rows, blocks] e8m0): served as GGUF MXFP4 rows, the codes
//    moved to ggml's order (the converter's repacking), gate/up rows de-interleaved.
// Llama/Mistral Q and K rows are served as stored (NeoX order): the config runs them with NeoX
// RoPE rather than permuting them into the GGUF order, which would copy both matrices.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "kiln/model/hf_config.h"
#include "kiln/model/safetensors.h"
#include "kiln/model/tensor_source.h"

namespace kiln::model {

class HfTensorSource final : public TensorSource {
 public:
  // Throws kiln::Error naming the first tensor the architecture needs that no shard holds, a
  // tensor two shards both hold, or a tensor whose shape does not fit the config.
  // quantize (Q8_0 or Q4_0): matmul weights and the embeddings are served in that type,
  // quantized when asked for (the weight store packs them once at load).
  HfTensorSource(const HfModelConfig& config, std::vector<std::shared_ptr<SafetensorsFile>> shards,
                 std::optional<DType> quantize = std::nullopt);

  bool has_tensor(const std::string& name) const override;
  StoredTensorInfo tensor_info(const std::string& name) const override;
  Tensor tensor(const std::string& name) const override;
  int64_t parameter_count() const override { return parameters_; }
  // Whether the checkpoint has its own LM head (lm_head.weight, not tied to the embeddings).
  bool has_output() const { return recipes_.count("output.weight") != 0; }

 private:
  struct Stored {
    const SafetensorsFile* file;
    const SafetensorsTensorInfo* info;
  };
  enum class Kind { kAsStored, kPlusOne, kStacked, kComputed, kRearranged, kMxfp4, kRowsReordered };
  struct Recipe {
    Kind kind = Kind::kAsStored;
    // kRearranged (gpt-oss experts, f32): the last dimension's even (0) or odd (1) entries, or
    // all (-1); then the last two dimensions swapped when `transpose`.
    int parity = -1;
    bool transpose = false;
    std::optional<DType> serve_as;     // --quantize: the type this matrix is converted to
    std::vector<std::string> sources;  // HF names (kStacked: one per expert)
    Tensor computed;                   // kComputed
    std::vector<int64_t> row_order;    // kRowsReordered: row i is the stored row row_order[i]
  };

  const Stored& stored(const std::string& hf_name) const;
  Tensor stored_tensor(const Recipe& r, const std::string& name) const;
  Shape stacked_shape(const Recipe& r) const;
  void add(const std::string& name, Kind kind, std::vector<std::string> sources);
  void add_optional(const std::string& name, const std::string& hf_name);
  void check_shape(const std::string& name, const Shape& expected) const;
  void map_names(const HfModelConfig& config);
  void map_mla_attention(const ModelConfig& c, const std::string& hf, const std::string& blk);
  void map_gpt_oss_experts(const ModelConfig& c, const std::string& hf, const std::string& blk);
  void map_plain_ffn(const ModelConfig& c, const std::string& hf, const std::string& blk);
  void map_falcon(const ModelConfig& c);  // hf_falcon_tensors.cc
  Tensor rows_reordered(const Recipe& r) const;
  void finish_names(const ModelConfig& c);
  void add_rearranged(const std::string& name, const std::string& hf_name, int parity,
                      bool transpose);
  Shape rearranged_shape(const Recipe& r) const;
  Tensor rearranged(const Recipe& r) const;
  void add_mxfp4(const std::string& name, const std::string& hf_name, int parity);
  Shape mxfp4_shape(const Recipe& r) const;
  Tensor mxfp4(const Recipe& r) const;

  std::vector<std::shared_ptr<SafetensorsFile>> shards_;
  std::unordered_map<std::string, Stored> stored_;   // HF name -> where it is
  std::unordered_map<std::string, Recipe> recipes_;  // GGUF name -> how to make it
  std::optional<DType> quantize_;
  int64_t parameters_ = 0;
};

}  // namespace kiln::model
