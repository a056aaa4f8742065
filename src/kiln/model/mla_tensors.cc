#include "kiln/model/mla_tensors.h"

#include <cstring>
#include <functional>
#include <unordered_map>
#include <vector>

#include "kiln/base/error.h"
#include "kiln/kernels/dequant.h"

namespace kiln::model {
namespace {

std::string blk(int il, const char* what) {
  return "blk." + std::to_string(il) + "." + what + ".weight";
}

// A served tensor: its type and shape, and how to make it from the source.
struct Derived {
  StoredTensorInfo info;
  std::function<Tensor()> make;
};

// rows[i] = the source row that output row i copies, or -1 for a row of zeros (all-zero bytes
// are 0 in every GGUF type). The source is viewed as rows of its last dimension.
Tensor gather_rows(const Tensor& src, const std::vector<int64_t>& rows) {
  const int64_t cols = src.shape().cols();
  Tensor out = Tensor::empty(src.dtype(), Shape{static_cast<int64_t>(rows.size()), cols});
  const size_t row_bytes = src.row_bytes();
  const int64_t src_rows = src.numel() / cols;
  const auto* from = static_cast<const uint8_t*>(src.data());
  auto* to = static_cast<uint8_t*>(out.data());
  for (size_t i = 0; i < rows.size(); ++i) {
    KILN_CHECK(rows[i] < src_rows, "mla: row {} of a {}-row tensor", rows[i], src_rows);
    if (rows[i] < 0) {
      std::memset(to + i * row_bytes, 0, row_bytes);
    } else {
      std::memcpy(to + i * row_bytes, from + rows[i] * row_bytes, row_bytes);
    }
  }
  return out;
}

std::vector<float> dequantized(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  const int64_t cols = t.shape().cols();
  const auto* src = static_cast<const uint8_t*>(t.data());
  for (int64_t r = 0; r < t.numel() / cols; ++r)
    kernels::dequantize_row(t.dtype(), src + r * t.row_bytes(), out.data() + r * cols, cols);
  return out;
}

class MlaTensorSource final : public TensorSource {
 public:
  MlaTensorSource(std::shared_ptr<const TensorSource> source, const ModelConfig& c)
      : source_(std::move(source)) {
    if (c.mla)
      for (int il = 0; il < c.n_layers; ++il) add_layer(c, il);
    if (!c.computed_rope_factors.empty() && !source_->has_tensor(kRopeFreqsTensor)) {
      const std::vector<float> f = c.computed_rope_factors;
      const Shape shape{static_cast<int64_t>(f.size())};
      add_f32(kRopeFreqsTensor, shape, [f, shape] {
        Tensor t = Tensor::empty(DType::F32, shape);
        std::memcpy(t.data(), f.data(), f.size() * sizeof(float));
        return t;
      });
    }
  }

  bool has_tensor(const std::string& name) const override {
    return derived_.count(name) != 0 || source_->has_tensor(name);
  }
  StoredTensorInfo tensor_info(const std::string& name) const override {
    auto it = derived_.find(name);
    return it != derived_.end() ? it->second.info : source_->tensor_info(name);
  }
  Tensor tensor(const std::string& name) const override {
    auto it = derived_.find(name);
    return it != derived_.end() ? it->second.make() : source_->tensor(name);
  }
  int64_t parameter_count() const override { return source_->parameter_count(); }
  std::string identity() const override {
    const std::string id = source_->identity();
    return id.empty() ? id : id + " mla-decompressed";
  }

 private:
  const TensorSource& src() const { return *source_; }

  StoredTensorInfo info_of(const std::string& name) const {
    KILN_CHECK(source_->has_tensor(name), "model file has no tensor '{}' needed by deepseek2",
               name);
    return source_->tensor_info(name);
  }

  // A tensor of the source's type whose rows are `rows` of `source_name`.
  void add_gather(const std::string& name, const std::string& source_name,
                  std::vector<int64_t> rows) {
    const StoredTensorInfo from = info_of(source_name);
    const Shape shape{static_cast<int64_t>(rows.size()), from.shape.cols()};
    put(name, StoredTensorInfo{from.dtype, from.type_name, shape},
        [this, source_name, rows = std::move(rows)] {
          return gather_rows(src().tensor(source_name), rows);
        });
  }

  void add_f32(const std::string& name, const Shape& shape, std::function<Tensor()> make) {
    put(name, StoredTensorInfo{DType::F32, "f32", shape}, std::move(make));
  }

  void put(const std::string& name, StoredTensorInfo info, std::function<Tensor()> make) {
    Derived& d = derived_[name];
    d.info = std::move(info);
    d.make = std::move(make);
  }

  void add_layer(const ModelConfig& c, int il) {
    const int64_t H = c.n_heads, hd = c.head_dim, rot = c.n_rot, nope = c.qk_nope_dim;
    const int64_t v = c.v_head_dim, lora = c.kv_lora_rank;
    // Q: each head's rows [nope | rope] become [rope | nope].
    std::vector<int64_t> q_rows;
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t j = 0; j < hd; ++j) q_rows.push_back(h * hd + (j < rot ? nope + j : j - rot));
    }
    const std::string q_src = blk(il, c.q_lora_rank > 0 ? "attn_q_b" : "attn_q");
    add_gather(mla_weight_name(il, "attn_q_mla"), q_src, q_rows);

    const std::string kv_a = blk(il, "attn_kv_a_mqa");
    std::vector<int64_t> latent_rows, k_pe_rows;
    for (int64_t r = 0; r < lora; ++r) latent_rows.push_back(r);
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t j = 0; j < hd; ++j) k_pe_rows.push_back(j < rot ? lora + j : -1);
    }
    add_gather(mla_weight_name(il, "attn_kv_c"), kv_a, latent_rows);
    add_gather(mla_weight_name(il, "attn_k_pe_mla"), kv_a, k_pe_rows);

    const std::string kv_b = blk(il, "attn_kv_b");
    if (source_->has_tensor(kv_b)) {
      // Hugging Face checkpoints and older GGUF files: kv_b rows per head, [nope | v].
      std::vector<int64_t> k_rows, v_rows;
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t j = 0; j < hd; ++j) {
          k_rows.push_back(j < rot ? -1 : h * (nope + v) + (j - rot));
          v_rows.push_back(j < v ? h * (nope + v) + nope + j : -1);
        }
      }
      add_gather(mla_weight_name(il, "attn_k_nope_mla"), kv_b, k_rows);
      add_gather(mla_weight_name(il, "attn_v_mla"), kv_b, v_rows);
    } else {
      // Files for llama.cpp's absorbed MLA: attn_k_b [H, lora, nope] (each head's key rows
      // transposed) and attn_v_b [H, v, lora].
      const std::string k_b = blk(il, "attn_k_b"), v_b = blk(il, "attn_v_b");
      KILN_CHECK(info_of(k_b).shape == (Shape{H, lora, nope}),
                 "tensor '{}' has shape {}, expected [{}, {}, {}]", k_b, info_of(k_b).shape.str(),
                 H, lora, nope);
      KILN_CHECK(info_of(v_b).shape == (Shape{H, v, lora}),
                 "tensor '{}' has shape {}, expected [{}, {}, {}]", v_b, info_of(v_b).shape.str(),
                 H, v, lora);
      add_f32(mla_weight_name(il, "attn_k_nope_mla"), Shape{H * hd, lora}, [=, this] {
        const std::vector<float> w = dequantized(src().tensor(k_b));
        Tensor out = Tensor::empty(DType::F32, Shape{H * hd, lora});
        auto* o = out.data_as<float>();
        std::memset(o, 0, out.nbytes());
        for (int64_t h = 0; h < H; ++h)
          for (int64_t l = 0; l < lora; ++l)
            for (int64_t n = 0; n < nope; ++n)
              o[(h * hd + rot + n) * lora + l] = w[(h * lora + l) * nope + n];
        return out;
      });
      std::vector<int64_t> v_rows;
      for (int64_t h = 0; h < H; ++h) {
        for (int64_t j = 0; j < hd; ++j) v_rows.push_back(j < v ? h * v + j : -1);
      }
      add_gather(mla_weight_name(il, "attn_v_mla"), v_b, v_rows);
    }

    // The output projection reads each head's v values at the head's first v slots.
    const std::string wo = blk(il, "attn_output");
    const int64_t d = info_of(wo).shape[0];
    KILN_CHECK(info_of(wo).shape == (Shape{d, H * v}),
               "tensor '{}' has shape {}, expected [{}, {}]", wo, info_of(wo).shape.str(), d,
               H * v);
    add_f32(mla_weight_name(il, "attn_output_mla"), Shape{d, H * hd}, [=, this] {
      const std::vector<float> w = dequantized(src().tensor(wo));
      Tensor out = Tensor::empty(DType::F32, Shape{d, H * hd});
      auto* o = out.data_as<float>();
      std::memset(o, 0, out.nbytes());
      for (int64_t r = 0; r < d; ++r)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t j = 0; j < v; ++j) o[r * H * hd + h * hd + j] = w[r * H * v + h * v + j];
      return out;
    });
  }

  std::shared_ptr<const TensorSource> source_;
  std::unordered_map<std::string, Derived> derived_;
};

}  // namespace

std::string mla_weight_name(int il, const char* what) { return blk(il, what); }

std::shared_ptr<const TensorSource> with_mla_tensors(std::shared_ptr<const TensorSource> source,
                                                     const ModelConfig& config) {
  // gpt-oss's YaRN factors come this way too (no MLA weights).
  if (!config.mla && config.computed_rope_factors.empty()) return source;
  return std::make_shared<MlaTensorSource>(std::move(source), config);
}

}  // namespace kiln::model
