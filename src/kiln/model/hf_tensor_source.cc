#include "kiln/model/hf_tensor_source.h"

#include <cstring>
#include <unordered_set>
#include <utility>

#include "kiln/base/error.h"
#include "kiln/base/half.h"
#include "kiln/base/log.h"
#include "kiln/kernels/dequant.h"
#include "kiln/kernels/quantize.h"

namespace kiln::model {

namespace {

// w + offset as a new f32 tensor (converted in f32, as the GGUF converter adds Gemma's 1).
Tensor to_f32(const Tensor& w, float offset) {
  Tensor out = Tensor::empty(DType::F32, w.shape());
  float* dst = out.data_as<float>();
  kernels::dequantize_row(w.dtype(), w.data(), dst, w.numel());
  for (int64_t i = 0; i < w.numel(); ++i) dst[i] += offset;
  return out;
}

// The rows of w (any float type) as t: Q8_0, Q4_0 or F16.
Tensor converted(const Tensor& w, DType t) {
  Tensor out = Tensor::empty(t, w.shape());
  const int64_t cols = w.shape().cols();
  const int64_t rows = w.numel() / cols;
  std::vector<float> row(static_cast<size_t>(cols));
  const auto* src = static_cast<const uint8_t*>(w.data());
  auto* dst = static_cast<uint8_t*>(out.data());
  for (int64_t r = 0; r < rows; ++r) {
    kernels::dequantize_row(w.dtype(), src + r * w.row_bytes(), row.data(), cols);
    uint8_t* out_row = dst + r * out.row_bytes();
    if (t == DType::F16) {
      auto* h = reinterpret_cast<uint16_t*>(out_row);
      for (int64_t i = 0; i < cols; ++i) h[i] = f32_to_f16(row[i]);
    } else {
      kernels::quantize_row(t, row.data(), out_row, cols);
    }
  }
  return out;
}

}  // namespace

HfTensorSource::HfTensorSource(const HfModelConfig& config,
                               std::vector<std::shared_ptr<SafetensorsFile>> shards,
                               std::optional<DType> quantize)
    : shards_(std::move(shards)), quantize_(quantize) {
  KILN_CHECK(!quantize || *quantize == DType::Q8_0 || *quantize == DType::Q4_0,
             "--quantize {} is not supported (q8_0, q4_0)", dtype_name(*quantize));
  for (const auto& shard : shards_) {
    for (const auto& info : shard->tensors()) {
      auto [it, fresh] = stored_.emplace(info.name, Stored{shard.get(), &info});
      KILN_CHECK(fresh, "tensor '{}' is in both {} and {}", info.name, it->second.file->path(),
                 shard->path());
      parameters_ += info.shape.numel();
    }
  }
  map_names(config);
}

const HfTensorSource::Stored& HfTensorSource::stored(const std::string& hf_name) const {
  auto it = stored_.find(hf_name);
  KILN_CHECK(it != stored_.end(), "the checkpoint has no tensor '{}'", hf_name);
  return it->second;
}

void HfTensorSource::add(const std::string& name, Kind kind, std::vector<std::string> sources) {
  for (const auto& s : sources) stored(s);  // each must exist
  Recipe r;
  r.kind = kind;
  r.sources = std::move(sources);
  recipes_[name] = std::move(r);
}

void HfTensorSource::add_optional(const std::string& name, const std::string& hf_name) {
  if (stored_.count(hf_name) != 0) add(name, Kind::kAsStored, {hf_name});
}

void HfTensorSource::check_shape(const std::string& name, const Shape& expected) const {
  auto it = recipes_.find(name);
  if (it == recipes_.end()) return;
  const Shape got = tensor_info(name).shape;
  KILN_CHECK(got == expected, "tensor '{}' has shape {}, but config.json implies {}",
             it->second.sources.empty() ? name : it->second.sources[0], got.str(), expected.str());
}

void HfTensorSource::map_names(const HfModelConfig& h) {
  const ModelConfig& c = h.config;
  if (c.arch == "falcon") {  // a naming of its own (transformer.h.N)
    map_falcon(c);
    finish_names(c);
    return;
  }
  const bool gemma = h.gemma_norm_offset;
  const Kind norm = gemma ? Kind::kPlusOne : Kind::kAsStored;
  const int64_t embd = c.n_embd;
  const int64_t q_rows = static_cast<int64_t>(c.n_heads) * c.head_dim;
  const int64_t kv_rows = static_cast<int64_t>(c.n_kv_heads) * c.head_dim;

  add("token_embd.weight", Kind::kAsStored, {"model.embed_tokens.weight"});
  add("output_norm.weight", norm, {"model.norm.weight"});
  add_optional("output_norm.bias", "model.norm.bias");  // LayerNorm's (StarCoder 2)
  if (!c.tied_output) add("output.weight", Kind::kAsStored, {"lm_head.weight"});
  if (c.rope_freq_factors) {
    Recipe r;
    r.kind = Kind::kComputed;
    const auto n = static_cast<int64_t>(h.rope_freq_factors.size());
    r.computed = Tensor::empty(DType::F32, Shape{n});
    std::memcpy(r.computed.data(), h.rope_freq_factors.data(), n * sizeof(float));
    recipes_[kRopeFreqsTensor] = std::move(r);
  }
  for (int il = 0; il < c.n_layers; ++il) {
    const std::string hf = "model.layers." + std::to_string(il) + ".";
    const std::string blk = "blk." + std::to_string(il) + ".";
    if (c.pre_norms) {
      add(blk + "attn_norm.weight", norm, {hf + "input_layernorm.weight"});
      add_optional(blk + "attn_norm.bias", hf + "input_layernorm.bias");
    }
    if (c.mla) {
      map_mla_attention(c, hf, blk);
    } else if (c.fused_qkv) {
      add(blk + "attn_qkv.weight", Kind::kAsStored, {hf + "self_attn.qkv_proj.weight"});
      check_shape(blk + "attn_qkv.weight", Shape{q_rows + 2 * kv_rows, embd});
    } else {
      for (const char* p : {"q", "k", "v"}) {
        const std::string proj = hf + "self_attn." + p + "_proj.";
        add(blk + "attn_" + p + ".weight", Kind::kAsStored, {proj + "weight"});
        add_optional(blk + "attn_" + p + ".bias", proj + "bias");
      }
      check_shape(blk + "attn_q.weight", Shape{q_rows, embd});
      check_shape(blk + "attn_k.weight", Shape{kv_rows, embd});
      check_shape(blk + "attn_v.weight", Shape{kv_rows, embd});
    }
    add(blk + "attn_output.weight", Kind::kAsStored, {hf + "self_attn.o_proj.weight"});
    add_optional(blk + "attn_output.bias", hf + "self_attn.o_proj.bias");
    if (c.attn_sinks) add(blk + "attn_sinks.weight", Kind::kAsStored, {hf + "self_attn.sinks"});
    check_shape(blk + "attn_output.weight",
                Shape{embd, c.mla ? c.n_heads * static_cast<int64_t>(c.v_head_dim) : q_rows});
    if (c.qk_norm || c.qk_norm_full) {
      add(blk + "attn_q_norm.weight", norm, {hf + "self_attn.q_norm.weight"});
      add(blk + "attn_k_norm.weight", norm, {hf + "self_attn.k_norm.weight"});
    }
    if (c.parallel_block) {
      // Command-R: the attention's input norm is the FFN's too
    } else if (!c.pre_norms) {  // OLMo 2: norms after the attention and the FFN only
      add(blk + "post_attention_norm.weight", norm, {hf + "post_attention_layernorm.weight"});
      add(blk + "post_ffw_norm.weight", norm, {hf + "post_feedforward_layernorm.weight"});
    } else if (c.post_norms) {
      add(blk + "post_attention_norm.weight", norm, {hf + "post_attention_layernorm.weight"});
      add(blk + "ffn_norm.weight", norm, {hf + "pre_feedforward_layernorm.weight"});
      add(blk + "post_ffw_norm.weight", norm, {hf + "post_feedforward_layernorm.weight"});
    } else {
      add(blk + c.ffn_norm + ".weight", norm, {hf + "post_attention_layernorm.weight"});
      add_optional(blk + c.ffn_norm + ".bias", hf + "post_attention_layernorm.bias");
    }
    if (c.arch == "gpt-oss") {
      map_gpt_oss_experts(c, hf, blk);
    } else if (c.n_experts > 0 && il >= c.n_dense_lead) {
      // Mixtral's checkpoints name the block block_sparse_moe and the experts' gate, down and
      // up projections w1, w2 and w3; Qwen3-MoE's name them as the dense MLP does.
      const bool mixtral = h.model_type == "mixtral";
      const std::string moe = hf + (mixtral ? "block_sparse_moe." : "mlp.");
      add(blk + "ffn_gate_inp.weight", Kind::kAsStored, {moe + "gate.weight"});
      const std::pair<const char*, const char*> projections[] = {
          {"gate", mixtral ? "w1" : "gate_proj"},
          {"up", mixtral ? "w3" : "up_proj"},
          {"down", mixtral ? "w2" : "down_proj"}};
      for (const auto& [gguf_name, hf_name] : projections) {
        std::vector<std::string> experts;
        for (int e = 0; e < c.n_experts; ++e) {
          experts.push_back(moe + "experts." + std::to_string(e) + "." + hf_name + ".weight");
        }
        add(blk + "ffn_" + gguf_name + "_exps.weight", Kind::kStacked, std::move(experts));
      }
      check_shape(blk + "ffn_gate_exps.weight", Shape{c.n_experts, c.n_ff_expert, embd});
      check_shape(blk + "ffn_up_exps.weight", Shape{c.n_experts, c.n_ff_expert, embd});
      check_shape(blk + "ffn_down_exps.weight", Shape{c.n_experts, embd, c.n_ff_expert});
      // DeepSeek: V3's score bias, and the shared experts beside the routed ones.
      add_optional(blk + "exp_probs_b.bias", moe + "gate.e_score_correction_bias");
      if (c.n_ff_shared > 0) {
        for (const char* p : {"gate", "up", "down"}) {
          add(blk + "ffn_" + p + "_shexp.weight", Kind::kAsStored,
              {moe + "shared_experts." + p + "_proj.weight"});
        }
        check_shape(blk + "ffn_gate_shexp.weight", Shape{c.n_ff_shared, embd});
        check_shape(blk + "ffn_down_shexp.weight", Shape{embd, c.n_ff_shared});
      }
    } else if (!c.gated_ffn) {
      map_plain_ffn(c, hf, blk);
    } else if (c.fused_gate_up) {
      // Phi-3's gate_up_proj holds the gate rows, then the up rows (fused_tensors.h).
      add(blk + "ffn_up.weight", Kind::kAsStored, {hf + "mlp.gate_up_proj.weight"});
      add(blk + "ffn_down.weight", Kind::kAsStored, {hf + "mlp.down_proj.weight"});
      check_shape(blk + "ffn_up.weight", Shape{2 * static_cast<int64_t>(c.n_ff), embd});
    } else {
      for (const char* p : {"gate", "up", "down"}) {
        add(blk + "ffn_" + p + ".weight", Kind::kAsStored, {hf + "mlp." + p + "_proj.weight"});
      }
      check_shape(blk + "ffn_gate.weight", Shape{c.n_ff, embd});
      check_shape(blk + "ffn_up.weight", Shape{c.n_ff, embd});
      check_shape(blk + "ffn_down.weight", Shape{embd, c.n_ff});
    }
  }
  check_shape("token_embd.weight", Shape{c.vocab, embd});
  check_shape("output.weight", Shape{c.vocab, embd});
  check_shape("output_norm.weight", Shape{embd});
  finish_names(c);
}

void HfTensorSource::finish_names(const ModelConfig& c) {
  // Matrices are quantized as llama.cpp's converter quantizes them: the router
  // (ffn_gate_inp), which picks the experts, is kept, and a matrix whose rows are not whole
  // blocks becomes F16.
  if (quantize_) {
    for (auto& [name, r] : recipes_) {
      if (r.kind != Kind::kAsStored && r.kind != Kind::kStacked && r.kind != Kind::kRearranged &&
          r.kind != Kind::kRowsReordered)
        continue;
      const Shape shape = tensor_info(name).shape;
      // gpt-oss's expert biases are [experts, width] but biases all the same: kept f32.
      if (shape.rank() < 2 || name.find("ffn_gate_inp") != std::string::npos ||
          name.ends_with(".bias"))
        continue;
      r.serve_as = shape.cols() % 32 == 0 ? *quantize_ : DType::F16;
    }
  }

  // Tensors no name maps to are probably a variant kiln does not model: say so in the log.
  std::unordered_set<std::string> used;
  for (const auto& [name, r] : recipes_) used.insert(r.sources.begin(), r.sources.end());
  for (const auto& [hf_name, s] : stored_) {
    if (used.count(hf_name) == 0 && hf_name != "lm_head.weight" &&
        hf_name.find("rotary_emb") == std::string::npos) {
      KILN_LOG_WARN("ignoring checkpoint tensor '{}' ({} does not use it)", hf_name, c.arch);
    }
  }
}

// An FFN without a gate: StarCoder 2's c_fc and c_proj, with their biases when it has them.
void HfTensorSource::map_plain_ffn(const ModelConfig& c, const std::string& hf,
                                   const std::string& blk) {
  const std::string up = hf + "mlp.c_fc.";
  const std::string down = hf + "mlp.c_proj.";
  add(blk + "ffn_up.weight", Kind::kAsStored, {up + "weight"});
  add_optional(blk + "ffn_up.bias", up + "bias");
  add(blk + "ffn_down.weight", Kind::kAsStored, {down + "weight"});
  add_optional(blk + "ffn_down.bias", down + "bias");
  check_shape(blk + "ffn_up.weight", Shape{c.n_ff, c.n_embd});
  check_shape(blk + "ffn_down.weight", Shape{c.n_embd, c.n_ff});
}

// DeepSeek's latent attention, under the names llama.cpp's converter gives it (kv_b_proj kept
// whole: mla_tensors.h rearranges it either way).
void HfTensorSource::map_mla_attention(const ModelConfig& c, const std::string& hf,
                                       const std::string& blk) {
  const Kind norm = Kind::kAsStored;
  const std::string a = hf + "self_attn.";
  const int64_t embd = c.n_embd, heads = c.n_heads;
  if (c.q_lora_rank > 0) {
    add(blk + "attn_q_a.weight", Kind::kAsStored, {a + "q_a_proj.weight"});
    add(blk + "attn_q_a_norm.weight", norm, {a + "q_a_layernorm.weight"});
    add(blk + "attn_q_b.weight", Kind::kAsStored, {a + "q_b_proj.weight"});
    check_shape(blk + "attn_q_a.weight", Shape{c.q_lora_rank, embd});
    check_shape(blk + "attn_q_b.weight", Shape{heads * c.head_dim, c.q_lora_rank});
  } else {
    add(blk + "attn_q.weight", Kind::kAsStored, {a + "q_proj.weight"});
    check_shape(blk + "attn_q.weight", Shape{heads * c.head_dim, embd});
  }
  add(blk + "attn_kv_a_mqa.weight", Kind::kAsStored, {a + "kv_a_proj_with_mqa.weight"});
  add(blk + "attn_kv_a_norm.weight", norm, {a + "kv_a_layernorm.weight"});
  add(blk + "attn_kv_b.weight", Kind::kAsStored, {a + "kv_b_proj.weight"});
  check_shape(blk + "attn_kv_a_mqa.weight", Shape{c.kv_lora_rank + c.n_rot, embd});
  check_shape(blk + "attn_kv_b.weight",
              Shape{heads * (c.qk_nope_dim + c.v_head_dim), c.kv_lora_rank});
}

// gpt-oss's router and experts under the names (and layouts) llama.cpp's converter gives them.
void HfTensorSource::map_gpt_oss_experts(const ModelConfig& c, const std::string& hf,
                                         const std::string& blk) {
  const std::string moe = hf + "mlp.";
  add(blk + "ffn_gate_inp.weight", Kind::kAsStored, {moe + "router.weight"});
  add(blk + "ffn_gate_inp.bias", Kind::kAsStored, {moe + "router.bias"});
  const std::string ex = moe + "experts.";
  if (stored_.count(ex + "gate_up_proj_blocks") != 0) {  // OpenAI's own: MXFP4
    add_mxfp4(blk + "ffn_gate_exps.weight", ex + "gate_up_proj", 0);
    add_mxfp4(blk + "ffn_up_exps.weight", ex + "gate_up_proj", 1);
    add_mxfp4(blk + "ffn_down_exps.weight", ex + "down_proj", -1);
  } else {
    add_rearranged(blk + "ffn_gate_exps.weight", ex + "gate_up_proj", 0, true);
    add_rearranged(blk + "ffn_up_exps.weight", ex + "gate_up_proj", 1, true);
    add_rearranged(blk + "ffn_down_exps.weight", ex + "down_proj", -1, true);
  }
  add_rearranged(blk + "ffn_gate_exps.bias", ex + "gate_up_proj_bias", 0, false);
  add_rearranged(blk + "ffn_up_exps.bias", ex + "gate_up_proj_bias", 1, false);
  add_rearranged(blk + "ffn_down_exps.bias", ex + "down_proj_bias", -1, false);
  const int64_t e = c.n_experts, f = c.n_ff_expert, d = c.n_embd;
  check_shape(blk + "ffn_gate_inp.weight", Shape{e, d});
  check_shape(blk + "ffn_gate_exps.weight", Shape{e, f, d});
  check_shape(blk + "ffn_up_exps.weight", Shape{e, f, d});
  check_shape(blk + "ffn_down_exps.weight", Shape{e, d, f});
  check_shape(blk + "ffn_gate_exps.bias", Shape{e, f});
  check_shape(blk + "ffn_down_exps.bias", Shape{e, d});
}

void HfTensorSource::add_rearranged(const std::string& name, const std::string& hf_name, int parity,
                                    bool transpose) {
  add(name, Kind::kRearranged, {hf_name});
  Recipe& r = recipes_[name];
  r.parity = parity;
  r.transpose = transpose;
  const Shape& s = stored(hf_name).info->shape;
  KILN_CHECK(s.rank() >= 2 && (parity < 0 || s.cols() % 2 == 0),
             "tensor '{}' has shape {}, not [experts, ..., even width]", hf_name, s.str());
}

Shape HfTensorSource::rearranged_shape(const Recipe& r) const {
  Shape s = stored(r.sources[0]).info->shape;
  const int rank = s.rank();
  KILN_CHECK(rank >= 2 && rank <= 3, "tensor '{}' has shape {}, not [experts, ...]", r.sources[0],
             s.str());
  const int last = rank == 3 ? 2 : 1;
  if (r.parity >= 0) s[last] /= 2;
  if (r.transpose) std::swap(s[last], s[last - 1]);
  return s;
}

Tensor HfTensorSource::rearranged(const Recipe& r) const {
  const Tensor src = stored(r.sources[0]).file->tensor(r.sources[0]);
  std::vector<float> in(static_cast<size_t>(src.numel()));
  kernels::dequantize_row(src.dtype(), src.data(), in.data(), src.numel());
  const Shape out_shape = rearranged_shape(r);
  Tensor out = Tensor::empty(DType::F32, out_shape);
  float* dst = out.data_as<float>();
  const int64_t width = src.shape().cols();                                    // stored last dim
  const int64_t rows = r.transpose ? src.shape()[src.shape().rank() - 2] : 1;  // swapped dim
  const int64_t kept = r.parity >= 0 ? width / 2 : width;
  const int64_t step = r.parity >= 0 ? 2 : 1;
  const int64_t off = r.parity >= 0 ? r.parity : 0;
  const int64_t blocks = src.numel() / (rows * width);
  for (int64_t b = 0; b < blocks; ++b) {
    const float* s = in.data() + b * rows * width;
    float* o = dst + b * rows * kept;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < kept; ++j) {
        const float v = s[i * width + j * step + off];
        if (r.transpose)
          o[j * rows + i] = v;
        else
          o[i * kept + j] = v;
      }
  }
  return out;
}

void HfTensorSource::add_mxfp4(const std::string& name, const std::string& hf_name, int parity) {
  add(name, Kind::kMxfp4, {hf_name + "_blocks", hf_name + "_scales"});
  recipes_[name].parity = parity;
  const SafetensorsTensorInfo& b = *stored(hf_name + "_blocks").info;
  const SafetensorsTensorInfo& s = *stored(hf_name + "_scales").info;
  KILN_CHECK(b.dtype == DType::I8 && s.dtype == DType::I8 && b.shape.rank() == 4 &&
                 b.shape[3] == 16 && s.shape == Shape({b.shape[0], b.shape[1], b.shape[2]}) &&
                 (parity < 0 || b.shape[1] % 2 == 0),
             "MXFP4 tensors '{}_blocks' {} and '{}_scales' {} are not U8 [experts, rows, blocks, "
             "16] and [experts, rows, blocks]",
             hf_name, b.shape.str(), hf_name, s.shape.str());
}

Shape HfTensorSource::mxfp4_shape(const Recipe& r) const {
  const Shape& b = stored(r.sources[0]).info->shape;
  return Shape{b[0], r.parity >= 0 ? b[1] / 2 : b[1], b[2] * 32};
}

// ggml's MXFP4 block: the e8m0 scale byte, then 16 bytes whose low nibbles are codes 0..15 and
// high nibbles codes 16..31. The checkpoint's 16 bytes hold codes 2i (low) and 2i + 1 (high).
Tensor HfTensorSource::mxfp4(const Recipe& r) const {
  const Tensor blocks = stored(r.sources[0]).file->tensor(r.sources[0]);
  const Tensor scales = stored(r.sources[1]).file->tensor(r.sources[1]);
  const Shape& bs = blocks.shape();
  const int64_t experts = bs[0], rows = bs[1], nb = bs[2];
  const Shape out_shape = mxfp4_shape(r);
  Tensor out = Tensor::empty(DType::MXFP4, out_shape);
  const auto* src = static_cast<const uint8_t*>(blocks.data());
  const auto* sc = static_cast<const uint8_t*>(scales.data());
  auto* dst = static_cast<uint8_t*>(out.data());
  const int64_t out_rows = out_shape[1];
  for (int64_t e = 0; e < experts; ++e) {
    for (int64_t i = 0; i < out_rows; ++i) {
      const int64_t row = e * rows + (r.parity >= 0 ? 2 * i + r.parity : i);
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* in = src + (row * nb + b) * 16;
        uint8_t code[32];
        for (int k = 0; k < 16; ++k) {
          code[2 * k] = in[k] & 0x0F;
          code[2 * k + 1] = in[k] >> 4;
        }
        *dst++ = sc[row * nb + b];
        for (int j = 0; j < 16; ++j) *dst++ = static_cast<uint8_t>(code[j] | (code[j + 16] << 4));
      }
    }
  }
  return out;
}

// [experts, rows, cols]: one expert's shape, experts deep (each expert is checked as stacked).
Shape HfTensorSource::stacked_shape(const Recipe& r) const {
  const Shape& one = stored(r.sources[0]).info->shape;
  Shape shape{static_cast<int64_t>(r.sources.size())};
  for (int i = 0; i < one.rank(); ++i) shape.push_back(one[i]);
  return shape;
}

bool HfTensorSource::has_tensor(const std::string& name) const { return recipes_.count(name) != 0; }

StoredTensorInfo HfTensorSource::tensor_info(const std::string& name) const {
  auto it = recipes_.find(name);
  KILN_CHECK(it != recipes_.end(), "no tensor '{}'", name);
  const Recipe& r = it->second;
  if (r.kind == Kind::kComputed) return {DType::F32, "f32", r.computed.shape()};
  if (r.kind == Kind::kMxfp4) return {DType::MXFP4, "mxfp4", mxfp4_shape(r)};
  if (r.kind == Kind::kRearranged) {
    const Shape shape = rearranged_shape(r);
    if (r.serve_as) return {*r.serve_as, std::string(dtype_name(*r.serve_as)), shape};
    return {DType::F32, "f32", shape};
  }
  const SafetensorsTensorInfo& first = *stored(r.sources[0]).info;
  const Shape shape = r.kind == Kind::kStacked ? stacked_shape(r) : first.shape;
  if (r.serve_as) return {*r.serve_as, std::string(dtype_name(*r.serve_as)), shape};
  switch (r.kind) {
    case Kind::kPlusOne:
      return {DType::F32, "f32", first.shape};
    case Kind::kStacked:
      return {first.dtype, std::string(dtype_name(first.dtype)), shape};
    default:
      // Vectors (norm weights, biases) are f32 in every GGUF file and the graph asks for f32.
      if (first.shape.rank() == 1) return {DType::F32, "f32", first.shape};
      return {first.dtype, std::string(dtype_name(first.dtype)), first.shape};
  }
}

Tensor HfTensorSource::tensor(const std::string& name) const {
  auto it = recipes_.find(name);
  KILN_CHECK(it != recipes_.end(), "no tensor '{}'", name);
  const Recipe& r = it->second;
  if (r.serve_as) {
    Recipe plain = r;
    plain.serve_as.reset();
    return converted(stored_tensor(plain, name), *r.serve_as);
  }
  return stored_tensor(r, name);
}

Tensor HfTensorSource::stored_tensor(const Recipe& r, const std::string& name) const {
  auto load = [&](const std::string& hf_name) {
    const Stored& s = stored(hf_name);
    return s.file->tensor(hf_name);
  };
  switch (r.kind) {
    case Kind::kComputed:
      return r.computed;
    case Kind::kRearranged:
      return rearranged(r);
    case Kind::kMxfp4:
      return mxfp4(r);
    case Kind::kRowsReordered:
      return rows_reordered(r);
    case Kind::kAsStored: {
      Tensor w = load(r.sources[0]);
      if (w.shape().rank() != 1 || w.dtype() == DType::F32) return w;
      return to_f32(w, 0.0f);
    }
    case Kind::kPlusOne:
      return to_f32(load(r.sources[0]), 1.0f);
    case Kind::kStacked: {
      Tensor out = Tensor::empty(stored(r.sources[0]).info->dtype, stacked_shape(r));
      auto* dst = static_cast<uint8_t*>(out.data());
      for (const auto& src : r.sources) {
        Tensor part = load(src);
        KILN_CHECK(part.dtype() == out.dtype() && part.shape() == stored(r.sources[0]).info->shape,
                   "expert tensor '{}' has shape {} of {}, unlike the other experts", src,
                   part.shape().str(), dtype_name(part.dtype()));
        std::memcpy(dst, part.data(), part.nbytes());
        dst += part.nbytes();
      }
      return out;
    }
  }
  fail("unreachable");
}

}  // namespace kiln::model
