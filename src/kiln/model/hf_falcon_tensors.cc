// Falcon's checkpoint names (transformer.h.N.*) under the GGUF names llama.cpp's converter gives
// them, and its fused query_key_value rows in the converter's order.
#include <cstring>

#include "kiln/base/error.h"
#include "kiln/model/hf_tensor_source.h"

namespace kiln::model {
namespace {

// Falcon stores query_key_value as n_kv groups of head rows, each group its n_heads / n_kv
// queries, then its key, then its value (7B: one group). The converter, and so attn_qkv, puts
// every query first, then every key, then every value; this lists the stored row of each of
// those rows.
std::vector<int64_t> falcon_qkv_rows(const ModelConfig& c) {
  const int64_t hd = c.head_dim;
  const int64_t groups = c.n_kv_heads;
  const int64_t per_group = c.n_heads / c.n_kv_heads;
  auto head_rows = [&](std::vector<int64_t>& out, int64_t group, int64_t slot) {
    const int64_t first = (group * (per_group + 2) + slot) * hd;
    for (int64_t d = 0; d < hd; ++d) out.push_back(first + d);
  };
  std::vector<int64_t> rows;
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t j = 0; j < per_group; ++j) head_rows(rows, g, j);
  for (int64_t g = 0; g < groups; ++g) head_rows(rows, g, per_group);      // keys
  for (int64_t g = 0; g < groups; ++g) head_rows(rows, g, per_group + 1);  // values
  return rows;
}

}  // namespace

void HfTensorSource::map_falcon(const ModelConfig& c) {
  const int64_t embd = c.n_embd;
  const int64_t qkv_rows = static_cast<int64_t>(c.n_heads + 2 * c.n_kv_heads) * c.head_dim;
  add("token_embd.weight", Kind::kAsStored, {"transformer.word_embeddings.weight"});
  add("output_norm.weight", Kind::kAsStored, {"transformer.ln_f.weight"});
  add("output_norm.bias", Kind::kAsStored, {"transformer.ln_f.bias"});
  if (!c.tied_output) add("output.weight", Kind::kAsStored, {"lm_head.weight"});
  const std::vector<int64_t> qkv_order = falcon_qkv_rows(c);
  for (int il = 0; il < c.n_layers; ++il) {
    const std::string hf = "transformer.h." + std::to_string(il) + ".";
    const std::string blk = "blk." + std::to_string(il) + ".";
    // 40B's attention and FFN norms are ln_attn and ln_mlp; the converter names the FFN's (the
    // one llama.cpp also reads first) attn_norm and the attention's attn_norm_2.
    const bool two_norms = stored_.count(hf + "ln_attn.weight") != 0;
    const std::pair<const char*, const char*> norms[] = {
        {"attn_norm", two_norms ? "ln_mlp" : "input_layernorm"},
        {"attn_norm_2", two_norms ? "ln_attn" : nullptr}};
    for (const auto& [gguf_name, hf_name] : norms) {
      if (hf_name == nullptr) continue;
      add(blk + gguf_name + ".weight", Kind::kAsStored, {hf + hf_name + ".weight"});
      add(blk + gguf_name + ".bias", Kind::kAsStored, {hf + hf_name + ".bias"});
    }
    const std::string qkv = blk + "attn_qkv.weight";
    add(qkv, Kind::kRowsReordered, {hf + "self_attention.query_key_value.weight"});
    recipes_[qkv].row_order = qkv_order;
    check_shape(qkv, Shape{qkv_rows, embd});
    add(blk + "attn_output.weight", Kind::kAsStored, {hf + "self_attention.dense.weight"});
    add(blk + "ffn_up.weight", Kind::kAsStored, {hf + "mlp.dense_h_to_4h.weight"});
    add(blk + "ffn_down.weight", Kind::kAsStored, {hf + "mlp.dense_4h_to_h.weight"});
    check_shape(blk + "attn_output.weight", Shape{embd, embd});
    check_shape(blk + "ffn_up.weight", Shape{c.n_ff, embd});
    check_shape(blk + "ffn_down.weight", Shape{embd, c.n_ff});
  }
  check_shape("token_embd.weight", Shape{c.vocab, embd});
  check_shape("output.weight", Shape{c.vocab, embd});
  check_shape("output_norm.weight", Shape{embd});
}

Tensor HfTensorSource::rows_reordered(const Recipe& r) const {
  const Tensor w = stored(r.sources[0]).file->tensor(r.sources[0]);
  const auto rows = static_cast<int64_t>(r.row_order.size());
  KILN_CHECK(w.shape().rank() == 2 && w.shape()[0] == rows, "tensor '{}' has shape {}, not {} rows",
             r.sources[0], w.shape().str(), rows);
  Tensor out = Tensor::empty(w.dtype(), w.shape());
  const size_t row_bytes = w.row_bytes();
  const auto* src = static_cast<const uint8_t*>(w.data());
  auto* dst = static_cast<uint8_t*>(out.data());
  for (int64_t i = 0; i < rows; ++i)
    std::memcpy(dst + i * row_bytes, src + r.row_order[i] * row_bytes, row_bytes);
  return out;
}

}  // namespace kiln::model
