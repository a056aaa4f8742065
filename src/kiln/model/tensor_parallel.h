// Tensor parallelism: which part of the model one rank of N holds (docs/tensor-parallel.md).
//
// Attention heads and FFN columns are split across ranks: Q/K/V and gate/up by output rows,
// attn_output and ffn_down by their input columns (each rank's product is a partial sum,
// added across ranks by the all_reduce the forward pass puts after each), the LM head by
// vocabulary rows. When there are fewer KV heads than ranks, each rank holds a copy of the KV
// head its query heads use. A rank's weights are served to the forward pass under the usual
// names as slices of the stored tensors (fused_tensors.h), so the model code sees a smaller
// model with n_heads/N heads and n_ff/N FFN columns.
#pragma once
#include <cstdint>
#include <vector>

#include "kiln/model/fused_tensors.h"
#include "kiln/model/model_config.h"
#include "kiln/model/tensor_source.h"

namespace kiln::model {

struct TpShard {
  ModelConfig config;       // this rank's: local heads, KV heads, FFN width; tp_size set
  FusedTensorMap slices;    // weight name -> the stored slice this rank holds
  int64_t vocab_begin = 0;  // the LM head rows [vocab_begin, vocab_end) this rank holds
  int64_t vocab_end = 0;
};

// Rank `rank` of `ranks`' part of a model whose full config is `full`; `fused` says where
// fused files keep each weight. Throws kiln::Error saying why when the model cannot be
// split this many ways (heads, KV heads or FFN width not divisible; a column cut that falls
// inside a quantization block; mixture-of-experts FFNs, which are not sharded).
TpShard shard_model(const ModelConfig& full, const FusedTensorMap& fused,
                    const TensorSource& source, int rank, int ranks);

// A checksum of what every rank must agree on before they run together: the full config,
// the rank count, the stored dtype and shape of every named weight, and the bytes of the
// small 1-D tensors (norm weights) that every rank reads whole. Two different model files
// give different checksums even when their shapes agree.
uint64_t shard_metadata_checksum(const ModelConfig& full, const TensorSource& source,
                                 const std::vector<std::string>& weight_names, int ranks);

}  // namespace kiln::model
