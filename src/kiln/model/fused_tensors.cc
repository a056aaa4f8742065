#include "kiln/model/fused_tensors.h"

namespace kiln::model {

FusedTensorMap fused_tensor_slices(const ModelConfig& c) {
  FusedTensorMap map;
  const int64_t q_rows = static_cast<int64_t>(c.n_heads) * c.head_dim;
  const int64_t kv_rows = static_cast<int64_t>(c.n_kv_heads) * c.head_dim;
  for (int il = 0; il < c.n_layers; ++il) {
    const std::string blk = "blk." + std::to_string(il) + ".";
    if (c.fused_qkv) {
      const std::string qkv = blk + "attn_qkv.weight";
      map[blk + "attn_q.weight"] = {qkv, 0, q_rows};
      map[blk + "attn_k.weight"] = {qkv, q_rows, q_rows + kv_rows};
      map[blk + "attn_v.weight"] = {qkv, q_rows + kv_rows, q_rows + 2 * kv_rows};
    }
    if (c.fused_gate_up) {
      const std::string up = blk + "ffn_up.weight";
      map[blk + "ffn_gate.weight"] = {up, 0, c.n_ff};
      map[blk + "ffn_up.weight"] = {up, c.n_ff, 2 * static_cast<int64_t>(c.n_ff)};
    }
  }
  return map;
}

}  // namespace kiln::model
