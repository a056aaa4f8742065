#include "kiln/model/bert_encoder.h"

#include <algorithm>
#include <cmath>

#include "kiln/base/error.h"
#include "kiln/base/half.h"
#include "kiln/kernels/elementwise.h"
#include "kiln/kernels/encoder_attention.h"
#include "kiln/kernels/gemm_bf16.h"
#include "kiln/kernels/matmul.h"
#include "kiln/kernels/norm.h"

namespace kiln::model {

EncoderPrecision encoder_precision_from_name(std::string_view name) {
  if (name == "bf16") return EncoderPrecision::kBf16;
  if (name == "f32") return EncoderPrecision::kF32;
  fail("encoder precision must be bf16 or f32, not '{}'", name);
}

const char* encoder_precision_name(EncoderPrecision p) {
  return p == EncoderPrecision::kBf16 ? "bf16" : "f32";
}

BertEncoder::BertEncoder(const BertConfig& config, const BertWeights& t, EncoderPrecision precision)
    : config_(config),
      precision_(precision),
      word_(t.floats("embeddings.word_embeddings.weight", {config.vocab_size, config.hidden})),
      position_(
          t.floats("embeddings.position_embeddings.weight", {config.max_positions, config.hidden})),
      token_type_(t.floats("embeddings.token_type_embeddings.weight",
                           {config.type_vocab_size, config.hidden})),
      emb_ln_w_(t.floats("embeddings.LayerNorm.weight", {config.hidden})),
      emb_ln_b_(t.floats("embeddings.LayerNorm.bias", {config.hidden})) {
  const int64_t h = config.hidden, inter = config.intermediate;
  auto linear = [&](const std::vector<std::string>& names, int64_t rows, int64_t cols) {
    Linear l;
    std::vector<Tensor> weights;
    std::vector<float> rows_f32;  // bf16: every weight's rows in order, as f32
    for (const std::string& n : names) {
      if (precision == EncoderPrecision::kBf16) {
        const std::vector<float> w = t.floats(n + ".weight", {rows, cols});
        rows_f32.insert(rows_f32.end(), w.begin(), w.end());
      } else {
        weights.push_back(t.get(n + ".weight", {rows, cols}));
      }
      const std::vector<float> b = t.floats(n + ".bias", {rows});
      l.bias.insert(l.bias.end(), b.begin(), b.end());
    }
    if (precision == EncoderPrecision::kBf16)
      l.bf16 =
          kernels::Bf16Weight::pack(rows_f32.data(), static_cast<int64_t>(l.bias.size()), cols);
    else
      l.f32 = weights.size() == 1 ? kernels::PackedWeight::pack(weights[0])
                                  : kernels::PackedWeight::pack_concat(weights);
    return l;
  };
  for (int64_t i = 0; i < config.layers; ++i) {
    const std::string p = "encoder.layer." + std::to_string(i) + ".";
    Layer l;
    l.qkv = linear(
        {p + "attention.self.query", p + "attention.self.key", p + "attention.self.value"}, h, h);
    l.attn_out = linear({p + "attention.output.dense"}, h, h);
    l.ln1_w = t.floats(p + "attention.output.LayerNorm.weight", {h});
    l.ln1_b = t.floats(p + "attention.output.LayerNorm.bias", {h});
    l.up = linear({p + "intermediate.dense"}, inter, h);
    l.down = linear({p + "output.dense"}, h, inter);
    l.ln2_w = t.floats(p + "output.LayerNorm.weight", {h});
    l.ln2_b = t.floats(p + "output.LayerNorm.bias", {h});
    layers_.push_back(std::move(l));
  }
}

void BertEncoder::linear(const Linear& l, const float* x, int64_t rows, float* y,
                         const float* residual, void* scratch,
                         const kernels::ExecContext& ctx) const {
  const int64_t n = static_cast<int64_t>(l.bias.size());
  if (precision_ == EncoderPrecision::kBf16) {
    kernels::gemm_bf16(l.bf16, x, rows, y, l.bias.data(), residual, scratch, ctx);
    ctx.sync();
    return;
  }
  kernels::matmul(l.f32, x, rows, y, residual, scratch, ctx);
  ctx.sync();
  kernels::add_row_broadcast(y, l.bias.data(), y, rows, n, ctx);
  ctx.sync();
}

void BertEncoder::linear_gelu(const Linear& l, const float* x, int64_t rows, float* y,
                              void* scratch, const kernels::ExecContext& ctx) const {
  const bool erf = config_.activation == BertActivation::kGeluErf;
  if (precision_ == EncoderPrecision::kBf16) {
    kernels::gemm_bf16(
        l.bf16, x, rows, y, l.bias.data(), nullptr, scratch, ctx,
        erf ? kernels::Bf16Activation::kGeluErf : kernels::Bf16Activation::kGeluTanh);
    ctx.sync();
    return;
  }
  linear(l, x, rows, y, nullptr, scratch, ctx);
  const int64_t n = rows * static_cast<int64_t>(l.bias.size());
  if (erf)
    kernels::gelu_erf(y, y, n, ctx);
  else
    kernels::gelu_tanh(y, y, n, ctx);
  ctx.sync();
}

std::vector<float> BertEncoder::forward(const std::vector<std::vector<int32_t>>& sequences,
                                        ThreadPool& pool) const {
  const int64_t h = config_.hidden, inter = config_.intermediate, heads = config_.heads;
  const int64_t hd = config_.head_dim();
  std::vector<int64_t> start{0};  // each sequence's first row
  int64_t longest = 0;
  for (const auto& s : sequences) {
    KILN_CHECK(!s.empty() && static_cast<int64_t>(s.size()) <= config_.max_positions,
               "a BERT input must have 1 to {} tokens, got {}", config_.max_positions, s.size());
    for (int32_t id : s)
      KILN_CHECK(id >= 0 && id < config_.vocab_size, "token id {} is outside the vocabulary ({})",
                 id, config_.vocab_size);
    start.push_back(start.back() + static_cast<int64_t>(s.size()));
    longest = std::max<int64_t>(longest, static_cast<int64_t>(s.size()));
  }
  const int64_t rows = start.back();
  std::vector<float> x(static_cast<size_t>(rows * h)), y(x.size()), attn(x.size());
  std::vector<float> qkv(static_cast<size_t>(rows * 3 * h)), mid(static_cast<size_t>(rows * inter));
  if (rows == 0) return x;
  size_t scratch_bytes = 64;  // 0 for float weights; asked for anyway
  for (const Layer& l : layers_)
    for (const Linear* w : {&l.qkv, &l.attn_out, &l.up, &l.down})
      scratch_bytes = std::max(scratch_bytes, precision_ == EncoderPrecision::kBf16
                                                  ? kernels::gemm_bf16_scratch_bytes(w->bf16, rows)
                                                  : kernels::matmul_scratch_bytes(w->f32, rows));
  std::vector<uint8_t> scratch(scratch_bytes);
  void* scratch_ptr = scratch.data();
  const int nth = pool.size();
  std::vector<std::vector<float>> attention_ws(
      static_cast<size_t>(nth),
      std::vector<float>(kernels::encoder_attention_workspace_floats(longest, hd)));
  std::vector<std::pair<int64_t, int64_t>> token_pos;  // (sequence, position) of each row
  token_pos.reserve(static_cast<size_t>(rows));
  for (size_t s = 0; s < sequences.size(); ++s)
    for (size_t p = 0; p < sequences[s].size(); ++p)
      token_pos.emplace_back(static_cast<int64_t>(s), static_cast<int64_t>(p));
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int64_t items = static_cast<int64_t>(sequences.size()) * heads;

  SpinBarrier barrier(nth);
  pool.run([&](int tid, int n) {
    const kernels::ExecContext ctx{tid, n, n > 1 ? &barrier : nullptr};
    // Embeddings: word + position + token type 0, then LayerNorm.
    const Range r = split_range(rows, tid, n, 1);
    for (int64_t i = r.begin; i < r.end; ++i) {
      const auto [s, p] = token_pos[static_cast<size_t>(i)];
      const float* w = word_.data() + sequences[static_cast<size_t>(s)][static_cast<size_t>(p)] * h;
      const float* pe = position_.data() + p * h;
      float* xi = x.data() + i * h;
      for (int64_t c = 0; c < h; ++c) xi[c] = w[c] + pe[c] + token_type_[static_cast<size_t>(c)];
    }
    ctx.sync();
    kernels::layer_norm(x.data(), emb_ln_w_.data(), emb_ln_b_.data(), x.data(), rows, h,
                        config_.layer_norm_eps, ctx);
    ctx.sync();
    for (const Layer& l : layers_) {
      linear(l.qkv, x.data(), rows, qkv.data(), nullptr, scratch_ptr, ctx);
      const Range a = split_range(items, tid, n, 1);
      for (int64_t it = a.begin; it < a.end; ++it) {
        const int64_t s = it / heads, head = it % heads;
        const float* base = qkv.data() + start[static_cast<size_t>(s)] * 3 * h + head * hd;
        kernels::encoder_attention(
            base, base + h, base + 2 * h, 3 * h,
            start[static_cast<size_t>(s) + 1] - start[static_cast<size_t>(s)], hd, scale,
            attn.data() + start[static_cast<size_t>(s)] * h + head * hd, h,
            attention_ws[static_cast<size_t>(tid)].data());
      }
      ctx.sync();
      // Post-norm: x = LayerNorm(x + attn W_o^T + b_o).
      linear(l.attn_out, attn.data(), rows, y.data(), x.data(), scratch_ptr, ctx);
      kernels::layer_norm(y.data(), l.ln1_w.data(), l.ln1_b.data(), x.data(), rows, h,
                          config_.layer_norm_eps, ctx);
      ctx.sync();
      linear_gelu(l.up, x.data(), rows, mid.data(), scratch_ptr, ctx);
      linear(l.down, mid.data(), rows, y.data(), x.data(), scratch_ptr, ctx);
      kernels::layer_norm(y.data(), l.ln2_w.data(), l.ln2_b.data(), x.data(), rows, h,
                          config_.layer_norm_eps, ctx);
      ctx.sync();
    }
  });
  return x;
}

}  // namespace kiln::model
