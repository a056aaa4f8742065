#include "kiln/model/tensor_parallel.h"

#include <fmt/format.h>
#include <xxhash.h>

#include <string>

#include "kiln/base/error.h"
#include "kiln/base/thread_pool.h"

namespace kiln::model {
namespace {

// Where `name` lives before any cut: its fused slice, or the whole stored tensor.
TensorSlice whole(const std::string& name, const FusedTensorMap& fused,
                  const TensorSource& source) {
  if (auto it = fused.find(name); it != fused.end()) return it->second;
  const StoredTensorInfo info = source.tensor_info(name);
  return TensorSlice{name, 0, info.shape[0]};
}

class Sharder {
 public:
  Sharder(const FusedTensorMap& fused, const TensorSource& source, TpShard& shard)
      : fused_(fused), source_(source), shard_(shard) {}

  // Rows [begin, end) of the weight (and of its bias when the file has one).
  void rows(const std::string& prefix, int64_t begin, int64_t end) {
    for (const std::string& name : {prefix + ".weight", prefix + ".bias"}) {
      if (name.ends_with(".bias") && !has(name)) continue;
      TensorSlice s = whole(name, fused_, source_);
      KILN_CHECK(s.begin + end <= s.end, "'{}' has {} rows, the split needs rows up to {}", name,
                 s.end - s.begin, end);
      s.end = s.begin + end;
      s.begin += begin;
      shard_.slices[name] = s;
    }
  }

  // Columns [begin, end) of the weight, which must fall on its quantization blocks.
  void columns(const std::string& prefix, int64_t begin, int64_t end) {
    const std::string name = prefix + ".weight";
    KILN_CHECK(!has(prefix + ".bias"),
               "'{}' has a bias, which tensor parallelism does not split (--tp)", prefix);
    TensorSlice s = whole(name, fused_, source_);
    const StoredTensorInfo info = source_.tensor_info(s.source);
    KILN_CHECK(info.dtype.has_value() && info.shape.rank() == 2, "'{}' is not a matrix", name);
    const int block = dtype_info(*info.dtype).block_size;
    KILN_CHECK(begin % block == 0 && end % block == 0,
               "tensor parallelism cuts '{}' ({}) at columns [{}, {}), which is not a whole number "
               "of its {}-value blocks; this model cannot be split {} ways (--tp)",
               name, info.type_name, begin, end, block, shard_.config.tp_size);
    s.col_begin = begin;
    s.col_end = end;
    shard_.slices[name] = s;
  }

  bool has(const std::string& name) const {
    return fused_.count(name) > 0 || source_.has_tensor(name);
  }

 private:
  const FusedTensorMap& fused_;
  const TensorSource& source_;
  TpShard& shard_;
};

}  // namespace

TpShard shard_model(const ModelConfig& full, const FusedTensorMap& fused,
                    const TensorSource& source, int rank, int ranks) {
  KILN_CHECK(ranks >= 1 && rank >= 0 && rank < ranks, "rank {} of {} is not a rank", rank, ranks);
  KILN_CHECK(full.n_experts == 0,
             "--tp {}: {} is a mixture-of-experts model, and kiln does not shard experts across "
             "ranks yet",
             ranks, full.arch);
  KILN_CHECK(full.n_heads % ranks == 0, "--tp {}: {} attention heads do not split {} ways", ranks,
             full.n_heads, ranks);
  KILN_CHECK(full.n_ff % ranks == 0, "--tp {}: an FFN width of {} does not split {} ways", ranks,
             full.n_ff, ranks);
  const int heads = full.n_heads / ranks;
  int kv_heads = 0;
  int kv_first = 0;
  if (full.n_kv_heads >= ranks) {
    KILN_CHECK(full.n_kv_heads % ranks == 0, "--tp {}: {} KV heads do not split {} ways", ranks,
               full.n_kv_heads, ranks);
    kv_heads = full.n_kv_heads / ranks;
    kv_first = rank * kv_heads;
  } else {
    // Fewer KV heads than ranks: every rank's query heads must share one KV head, of which
    // that rank keeps a copy.
    KILN_CHECK(ranks % full.n_kv_heads == 0,
               "--tp {}: {} KV heads cannot be shared out evenly among {} ranks", ranks,
               full.n_kv_heads, ranks);
    kv_heads = 1;
    kv_first = rank / (ranks / full.n_kv_heads);
  }

  TpShard shard;
  shard.config = full;
  shard.config.n_heads = heads;
  shard.config.n_kv_heads = kv_heads;
  shard.config.n_ff = full.n_ff / ranks;
  shard.config.tp_size = ranks;
  const Range vocab = split_range(full.vocab, rank, ranks);
  shard.vocab_begin = vocab.begin;
  shard.vocab_end = vocab.end;

  Sharder cut(fused, source, shard);
  const int64_t hd = full.head_dim;
  const int64_t ff = shard.config.n_ff;
  for (int il = 0; il < full.n_layers; ++il) {
    const std::string blk = "blk." + std::to_string(il);
    cut.rows(blk + ".attn_q", rank * heads * hd, (rank + 1) * heads * hd);
    cut.rows(blk + ".attn_k", kv_first * hd, (kv_first + kv_heads) * hd);
    cut.rows(blk + ".attn_v", kv_first * hd, (kv_first + kv_heads) * hd);
    cut.columns(blk + ".attn_output", rank * heads * hd, (rank + 1) * heads * hd);
    if (full.gated_ffn) cut.rows(blk + ".ffn_gate", rank * ff, (rank + 1) * ff);
    cut.rows(blk + ".ffn_up", rank * ff, (rank + 1) * ff);
    cut.columns(blk + ".ffn_down", rank * ff, (rank + 1) * ff);
  }
  // The LM head, by vocabulary rows, under its own name even when it is the (tied) embedding
  // table: the embedding lookup still reads the whole table, row by row.
  TensorSlice head = whole(full.tied_output ? "token_embd.weight" : "output.weight", fused, source);
  head.end = head.begin + vocab.end;
  head.begin += vocab.begin;
  shard.slices[kTpLmHeadTensor] = head;
  return shard;
}

uint64_t shard_metadata_checksum(const ModelConfig& c, const TensorSource& source,
                                 const std::vector<std::string>& weight_names, int ranks) {
  std::string text = fmt::format(
      "tp {} | {} layers {} embd {} ff {} heads {} kv {} hd {} vocab {} rot {} eps {} | ", ranks,
      c.arch, c.n_layers, c.n_embd, c.n_ff, c.n_heads, c.n_kv_heads, c.head_dim, c.vocab, c.n_rot,
      c.rms_eps);
  XXH64_state_t* state = XXH64_createState();
  XXH64_reset(state, 0);
  for (const std::string& name : weight_names) {
    if (!source.has_tensor(name)) {
      text += name + " (served from a fused tensor) | ";
      continue;
    }
    const StoredTensorInfo info = source.tensor_info(name);
    text += fmt::format("{} {} {} | ", name, info.type_name, info.shape.str());
    if (info.shape.rank() == 1) {
      const Tensor t = source.tensor(name);
      XXH64_update(state, t.data(), t.nbytes());
    }
  }
  XXH64_update(state, text.data(), text.size());
  const uint64_t sum = XXH64_digest(state);
  XXH64_freeState(state);
  return sum;
}

}  // namespace kiln::model
