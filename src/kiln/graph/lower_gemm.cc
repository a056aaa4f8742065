// Lowering of the weight-reading ops: embedding lookup, matmul and its fused forms (residual
// epilogue, merged QKV/gate-up split, greedy LM head), the mixture-of-experts FFN. Weights come
// pre-packed from the WeightProvider; the scratch for quantized activations is sized here, once,
// for the exact m.
#include <cstring>

#include "kiln/base/error.h"
#include "kiln/graph/lowering_internal.h"
#include "kiln/kernels/embedding.h"
#include "kiln/kernels/matmul.h"
#include "kiln/kernels/moe_ffn.h"
#include "kiln/kernels/norm.h"

namespace kiln::graph::lowering {
namespace {

using kernels::PackedWeight;

const PackedWeight& weight_of(const Step& s) { return *static_cast<const PackedWeight*>(s.state); }

void run_embedding(const Step& s, const kernels::ExecContext& c) {
  kernels::embedding(static_cast<DType>(s.dim[3]), s.in[0], s.dim[0], s.dim[1],
                     static_cast<const int32_t*>(s.in[1]), s.dim[2], static_cast<float*>(s.out[0]),
                     c);
}

void run_matmul(const Step& s, const kernels::ExecContext& c) {
  kernels::matmul(weight_of(s), static_cast<const float*>(s.in[0]), s.dim[0],
                  static_cast<float*>(s.out[0]), static_cast<const float*>(s.in[2]), s.scratch, c);
}

void run_matmul_split(const Step& s, const kernels::ExecContext& c) {
  float* outs[4];
  for (int i = 0; i < 4; ++i) outs[i] = static_cast<float*>(s.out[i]);
  kernels::matmul_split(weight_of(s), static_cast<const float*>(s.in[0]), s.dim[0], outs, &s.dim[2],
                        static_cast<int>(s.dim[1]), s.scratch, c);
}

void run_moe_ffn(const Step& s, const kernels::ExecContext& c) {
  kernels::moe_ffn(*static_cast<const kernels::MoeFfnWeights*>(s.state),
                   static_cast<const float*>(s.in[0]), s.dim[0], static_cast<float*>(s.out[0]),
                   s.scratch, c);
}

// rms_norm into scratch, then the LM head with argmax: logits are never written.
void run_norm_matmul_argmax(const Step& s, const kernels::ExecContext& c) {
  const int64_t m = s.dim[0];
  const int64_t k = s.dim[1];
  auto* normed = static_cast<float*>(s.scratch);
  kernels::rms_norm(static_cast<const float*>(s.in[0]), static_cast<const float*>(s.in[1]), normed,
                    m, k, s.f[0], c);
  c.sync();
  void* mm_scratch = static_cast<char*>(s.scratch) + s.dim[2];
  kernels::matmul_argmax(weight_of(s), normed, m, static_cast<int32_t*>(s.out[0]), mm_scratch, c);
}

void run_take_rows(const Step& s, const kernels::ExecContext& c) {
  const auto* rows = static_cast<const int32_t*>(s.in[1]);
  const size_t row_bytes = static_cast<size_t>(s.dim[1]);
  const int64_t n_src = s.dim[2];
  Range r = split_range(s.dim[0], c.tid, c.nth);
  for (int64_t i = r.begin; i < r.end; ++i) {
    char* dst = static_cast<char*>(s.out[0]) + i * row_bytes;
    int32_t src = rows[i];
    if (src < 0 || src >= n_src) {
      std::memset(dst, 0, row_bytes);  // inert padded row
    } else {
      std::memcpy(dst, static_cast<const char*>(s.in[0]) + src * row_bytes, row_bytes);
    }
  }
}

size_t align64(size_t n) { return (n + 63) / 64 * 64; }

}  // namespace

bool lower_gemm(const LowerContext& ctx, const Node& node, Lowered& l) {
  Step& s = l.step;
  const Graph& g = *ctx.graph;
  switch (node.op) {
    case Op::Embedding: {
      const Tensor& table = ctx.weights->raw(g.node(node.inputs[0].node));
      s.run = run_embedding;
      s.in[0] = table.data();
      s.dim[0] = table.shape()[0];
      s.dim[1] = table.shape()[1];
      s.dim[2] = g.type(node.inputs[1]).shape.numel();
      s.dim[3] = static_cast<int64_t>(table.dtype());
      return true;
    }
    case Op::Matmul:
    case Op::MatmulAdd: {
      const PackedWeight& w = ctx.weights->packed(g.node(node.inputs[1].node));
      const int64_t m = g.type(node.inputs[0]).shape.rows();
      s.run = run_matmul;
      s.state = const_cast<PackedWeight*>(&w);
      s.dim[0] = m;
      if (node.op == Op::Matmul) s.in[2] = nullptr;
      l.scratch_bytes = kernels::matmul_scratch_bytes(w, m);
      return true;
    }
    case Op::MatmulSplit: {
      const PackedWeight& w = ctx.weights->packed(g.node(node.inputs[1].node));
      const int64_t m = g.type(node.inputs[0]).shape.rows();
      KILN_CHECK(node.outputs.size() <= 4, "matmul_split supports at most 4 outputs");
      s.run = run_matmul_split;
      s.state = const_cast<PackedWeight*>(&w);
      s.dim[0] = m;
      s.dim[1] = static_cast<int64_t>(node.outputs.size());
      for (size_t i = 0; i < node.outputs.size(); ++i) s.dim[2 + i] = node.outputs[i].shape.cols();
      l.scratch_bytes = kernels::matmul_scratch_bytes(w, m);
      return true;
    }
    case Op::MoeFfn: {
      auto param = [&](int i) { return &g.node(node.inputs[i].node); };
      auto moe = std::make_shared<kernels::MoeFfnWeights>();
      moe->router = &ctx.weights->packed(*param(1));
      moe->gate_up = &ctx.weights->packed_experts({param(2), param(3)});
      moe->down = &ctx.weights->packed_experts({param(4)});
      moe->top_k = static_cast<int>(node.attrs.get_int("top_k"));
      moe->norm_topk_prob = node.attrs.get_int("norm_topk_prob") != 0;
      const int64_t m = g.type(node.inputs[0]).shape.rows();
      s.run = run_moe_ffn;
      s.state = moe.get();
      s.dim[0] = m;
      l.scratch_bytes = kernels::moe_ffn_scratch_bytes(*moe, m);
      l.owned = std::move(moe);
      return true;
    }
    case Op::NormMatmulArgmax: {
      const PackedWeight& w = ctx.weights->packed(g.node(node.inputs[2].node));
      const ValueType& x = g.type(node.inputs[0]);
      const int64_t m = x.shape.rows();
      s.run = run_norm_matmul_argmax;
      s.state = const_cast<PackedWeight*>(&w);
      s.dim[0] = m;
      s.dim[1] = x.shape.cols();
      s.dim[2] = static_cast<int64_t>(align64(sizeof(float) * m * x.shape.cols()));
      s.f[0] = static_cast<float>(node.attrs.get_float("eps"));
      l.scratch_bytes = s.dim[2] + kernels::matmul_argmax_scratch_bytes(w, m, ctx.n_threads);
      return true;
    }
    case Op::TakeRows: {
      const ValueType& x = g.type(node.inputs[0]);
      s.run = run_take_rows;
      s.dim[0] = node.outputs[0].shape[0];
      s.dim[1] = static_cast<int64_t>(dtype_bytes(x.dtype, x.shape.cols()));
      s.dim[2] = x.shape.rows();
      return true;
    }
    default:
      return false;
  }
}

}  // namespace kiln::graph::lowering
