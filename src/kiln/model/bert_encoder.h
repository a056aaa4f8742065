// A BERT encoder (embeddings + post-norm layers with biases, bidirectional attention) over the
// tensors of a Hugging Face checkpoint, computing the last layer's hidden states.
//
// Batching: the sequences of a call are PACKED, not padded: their tokens are rows of one
// [total tokens, hidden] matrix, so every linear layer is one matmul over all of them, and the
// attention of each sequence reads only its own rows (what BERT's padding mask achieves, with
// no padded rows to compute). All threads of the pool run each step; a step's result for a
// sequence does not depend on which other sequences share the batch.
//
// Precision: in bf16 (the default) the four matrices of each layer are rounded to bfloat16 and
// multiplied with bfloat16 activations (kernels/gemm_bf16.h: twice the f32 rate, a cosine of
// about 3e-5 at worst on all-MiniLM's sentence embeddings); in f32 they keep the checkpoint's
// float type (f32, f16 or bf16, packed once at load) and multiply f32 activations. Vectors
// (biases, norms), the embedding tables, attention and LayerNorm are f32 either way.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/base/thread_pool.h"
#include "kiln/kernels/gemm_bf16.h"
#include "kiln/kernels/packed_weight.h"
#include "kiln/model/bert_config.h"
#include "kiln/model/bert_weights.h"

namespace kiln::model {

enum class EncoderPrecision { kBf16, kF32 };
// "bf16" | "f32" -> the precision; kiln::Error naming the choices otherwise.
EncoderPrecision encoder_precision_from_name(std::string_view name);
const char* encoder_precision_name(EncoderPrecision p);

class BertEncoder {
 public:
  // Throws kiln::Error naming the first tensor that is missing or has the wrong shape. The
  // weights are copied or packed: `weights` need not outlive the encoder.
  BertEncoder(const BertConfig& config, const BertWeights& weights,
              EncoderPrecision precision = EncoderPrecision::kBf16);

  const BertConfig& config() const { return config_; }
  EncoderPrecision precision() const { return precision_; }

  // Hidden states of the last layer, [sum of lengths, hidden], sequences in order. Every
  // sequence must have 1..max_positions ids within the vocabulary (kiln::Error otherwise).
  std::vector<float> forward(const std::vector<std::vector<int32_t>>& sequences,
                             ThreadPool& pool) const;

 private:
  // One of the two forms, as the precision says.
  struct Linear {
    kernels::PackedWeight f32;
    kernels::Bf16Weight bf16;
    std::vector<float> bias;
  };
  struct Layer {
    Linear qkv;  // query, key and value rows in one weight
    Linear attn_out;
    std::vector<float> ln1_w, ln1_b;
    Linear up;
    Linear down;
    std::vector<float> ln2_w, ln2_b;
  };

  // y = x W^T + b (+ residual, which may alias y), on every thread of the group; synchronized.
  void linear(const Linear& l, const float* x, int64_t rows, float* y, const float* residual,
              void* scratch, const kernels::ExecContext& ctx) const;
  // y = GELU(x W^T + b), the FFN's up projection; synchronized.
  void linear_gelu(const Linear& l, const float* x, int64_t rows, float* y, void* scratch,
                   const kernels::ExecContext& ctx) const;

  BertConfig config_;
  EncoderPrecision precision_;
  std::vector<float> word_, position_, token_type_;  // embedding tables, f32
  std::vector<float> emb_ln_w_, emb_ln_b_;
  std::vector<Layer> layers_;
};

}  // namespace kiln::model
