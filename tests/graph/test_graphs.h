// Small model-shaped graphs built with the Builder, shared by graph tests: a Gemma-3-like
// decoder (qk-norm, GeGLU, post norms) and a Llama-like one (SiLU gate, plain residuals).
#pragma once
#include <fmt/format.h>

#include <cmath>
#include <string>

#include "kiln/graph/builder.h"

namespace kiln::graph::testing {

struct ToyConfig {
  int layers = 2;
  int tokens = 2;  // T: rows in the step
  int seqs = 2;    // S: sequences in the step
  int dim = 64;    // D
  int ff = 128;
  int heads = 2;
  int kv_heads = 1;
  int head_dim = 32;
  int vocab = 96;
  bool gemma = true;  // qk norm, GeGLU, post norms; else Llama-style
  DType weight = DType::Q8_0;
};

inline Graph build_toy_decoder(const ToyConfig& c) {
  Builder b("decode");
  b.bind_dim("B", c.tokens);
  const int64_t T = c.tokens, D = c.dim, hd = c.head_dim;
  Value ids = b.input("input_ids", DType::I32, {T});
  Value pos = b.input("positions", DType::I32, {T});
  Value slots = b.input("cache_slots", DType::I32, {T});
  Value bt = b.input("block_table", DType::I32, {c.seqs, 4});
  Value seq_lens = b.input("seq_lens", DType::I32, {c.seqs});
  Value token_seq = b.input("token_seq", DType::I32, {T});
  Value kv = b.state("kv_pool", DType::F16, {c.layers, 2, 64, c.kv_heads * hd});
  Value emb = b.param("token_embd", c.weight, {c.vocab, D});
  Value x = b.embedding(emb, ids);
  if (c.gemma) x = b.scale(x, std::sqrt(static_cast<double>(D)));
  for (int l = 0; l < c.layers; ++l) {
    auto p = [&](const std::string& n, DType dt, const Shape& s) {
      return b.param(fmt::format("blk.{}.{}", l, n), dt, s);
    };
    Value n = b.rms_norm(x, p("attn_norm", DType::F32, {D}), 1e-6);
    Value q = b.matmul(n, p("attn_q", c.weight, {c.heads * hd, D}));
    Value k = b.matmul(n, p("attn_k", c.weight, {c.kv_heads * hd, D}));
    Value v = b.matmul(n, p("attn_v", c.weight, {c.kv_heads * hd, D}));
    const double base = c.gemma ? 10000.0 : 500000.0;
    if (c.gemma) {
      q = b.reshape(q, {T, c.heads, hd});
      q = b.rms_norm(q, p("attn_q_norm", DType::F32, {hd}), 1e-6);
      q = b.reshape(q, {T, c.heads * hd});
      k = b.reshape(k, {T, c.kv_heads, hd});
      k = b.rms_norm(k, p("attn_k_norm", DType::F32, {hd}), 1e-6);
      k = b.reshape(k, {T, c.kv_heads * hd});
    }
    q = b.rope(q, pos, c.head_dim, base, c.gemma);
    k = b.rope(k, pos, c.head_dim, base, c.gemma);
    kv = b.kv_write(kv, k, v, slots, l);
    AttentionSpec spec{l, c.heads, c.kv_heads, c.head_dim, 0, 1.0f / std::sqrt(float(hd))};
    Value a = b.attention(q, kv, bt, seq_lens, pos, token_seq, spec);
    Value o = b.matmul(a, p("attn_output", c.weight, {D, c.heads * hd}));
    if (c.gemma) o = b.rms_norm(o, p("post_attention_norm", DType::F32, {D}), 1e-6);
    x = b.add(x, o);
    n = b.rms_norm(x, p("ffn_norm", DType::F32, {D}), 1e-6);
    Value g = b.matmul(n, p("ffn_gate", c.weight, {c.ff, D}));
    Value u = b.matmul(n, p("ffn_up", c.weight, {c.ff, D}));
    Value h = b.mul(c.gemma ? b.gelu(g) : b.silu(g), u);
    Value d = b.matmul(h, p("ffn_down", c.weight, {D, c.ff}));
    if (c.gemma) d = b.rms_norm(d, p("post_ffw_norm", DType::F32, {D}), 1e-6);
    x = b.add(x, d);
  }
  Value n = b.rms_norm(x, b.param("output_norm", DType::F32, {D}), 1e-6);
  Value logits = b.matmul(n, emb);
  b.output(b.argmax(logits));
  return b.finish();
}

}  // namespace kiln::graph::testing
