// The forward pass of every supported architecture, written once against graph::Builder.
// Eager mode interprets the graph this records; graph mode compiles it. The graph's inputs
// are the StepBatch fields (engine/step_batch.h) plus the KV pool as one state input.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "kiln/base/dtype.h"
#include "kiln/base/shape.h"
#include "kiln/graph/ir.h"
#include "kiln/kernels/kv_cache.h"
#include "kiln/model/model_config.h"

namespace kiln::model {

// Names of the graph inputs (shared by the model code, the interpreter and the graph runner).
namespace input_names {
inline constexpr const char* kTokenIds = "input_ids";      // i32[T]
inline constexpr const char* kPositions = "positions";     // i32[T]
inline constexpr const char* kTokenSeq = "token_seq";      // i32[T]
inline constexpr const char* kSlots = "out_cache_slots";   // i32[T]
inline constexpr const char* kBlockTable = "block_table";  // i32[S, max_pages_per_seq]
inline constexpr const char* kSeqLens = "seq_lens";        // i32[S]
inline constexpr const char* kLogitRows = "logit_rows";    // i32[R]: rows whose logits are wanted
inline constexpr const char* kHiddenRows = "hidden_rows";  // i32[H]: rows whose hidden states are
inline constexpr const char* kKvPool = "kv_pool";          // state: see kv_state_type
}  // namespace input_names

struct ForwardShape {
  int64_t tokens = 1;  // T
  int64_t seqs = 1;    // S
  int64_t max_pages_per_seq = 1;
  int64_t logit_rows = -1;  // R; -1: every row (decode), no take_rows
  bool greedy = false;      // output argmax ids i32[R] instead of logits f32[R, V]
  // H > 0: the final-norm hidden states f32[H, n_embd] of the kHiddenRows rows are an output
  // too, after the logits (embeddings from a decoder, beside generation rows in one step).
  int64_t hidden_rows = 0;
  // False: no LM head, the hidden states are the only output (a step of embedding rows only).
  bool logits = true;
  int64_t kv_pages = 0;  // pages in the pool (the state input's shape)
  int page_size = 16;
  kernels::KvDtype kv_dtype = kernels::KvDtype::F16;
};

// The type of the KV pool state input: f16[2*layers, pages, page_size, kv_dim] for an f16
// pool; for q8 the pool's bytes, i8[kernels::kv_pool_bytes] (int8 planes, then the scale
// planes; kernels/kv_cache.h). The graph and whoever binds the pool both use this.
graph::ValueType kv_state_type(const ModelConfig& config, const ForwardShape& shape);

// Looks up a weight's dtype and shape by GGUF tensor name (nullopt: absent).
struct WeightMeta {
  DType dtype;
  Shape shape;
};
using WeightLookup = std::function<std::optional<WeightMeta>(const std::string& name)>;

// Records one forward step. `name` becomes the graph's name ("decode", "prefill").
graph::Graph build_forward(const ModelConfig& config, const WeightLookup& weights,
                           const ForwardShape& shape, const std::string& name);

}  // namespace kiln::model
