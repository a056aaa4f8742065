// A BERT encoder (embeddings + post-norm layers with biases, bidirectional attention) over the
// tensors of a Hugging Face checkpoint, computing the last layer's hidden states.
//
// Batching: the sequences of a call are PACKED, not padded: their tokens are rows of one
// [total tokens, hidden] matrix, so every linear layer is one matmul over all of them, and the
// attention of each sequence reads only its own rows (what BERT's padding mask achieves, with
// no padded rows to compute). All threads of the pool run each step; a step's result for a
// sequence does not depend on which other sequences share the batch.
//
// Weights keep the checkpoint's float type (f32, f16 or bf16 matrices, packed once at load);
// vectors (biases, norms) and the embedding tables are read as f32.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kiln/base/thread_pool.h"
#include "kiln/kernels/packed_weight.h"
#include "kiln/model/bert_config.h"
#include "kiln/model/safetensors.h"

namespace kiln::model {

class BertEncoder {
 public:
  // Throws kiln::Error naming the first tensor that is missing or has the wrong shape.
  // Tensor names may carry a "bert." prefix (BertForMaskedLM and friends) or none (BertModel).
  BertEncoder(const BertConfig& config,
              const std::vector<std::shared_ptr<SafetensorsFile>>& shards);

  const BertConfig& config() const { return config_; }

  // Hidden states of the last layer, [sum of lengths, hidden], sequences in order. Every
  // sequence must have 1..max_positions ids within the vocabulary (kiln::Error otherwise).
  std::vector<float> forward(const std::vector<std::vector<int32_t>>& sequences,
                             ThreadPool& pool) const;

 private:
  struct Linear {
    kernels::PackedWeight weight;
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

  BertConfig config_;
  std::vector<float> word_, position_, token_type_;  // embedding tables, f32
  std::vector<float> emb_ln_w_, emb_ln_b_;
  std::vector<Layer> layers_;
};

}  // namespace kiln::model
