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

void run_embedding(const Step& s, const EmbeddingArgs& a, const kernels::ExecContext& c) {
  kernels::embedding(a.table_dtype, s.in[0], a.vocab, a.dim, static_cast<const int32_t*>(s.in[1]),
                     a.tokens, static_cast<float*>(s.out[0]), c);
}

void run_matmul(const Step& s, const MatmulArgs& a, const kernels::ExecContext& c) {
  kernels::matmul(weight_of(s), static_cast<const float*>(s.in[0]), a.rows,
                  static_cast<float*>(s.out[0]), static_cast<const float*>(s.in[2]), s.scratch, c);
}

void run_matmul_split(const Step& s, const MatmulSplitArgs& a, const kernels::ExecContext& c) {
  float* outs[kMaxSplitOutputs];
  for (int i = 0; i < kMaxSplitOutputs; ++i) outs[i] = static_cast<float*>(s.out[i]);
  kernels::matmul_split(weight_of(s), static_cast<const float*>(s.in[0]), a.rows, outs, a.cols,
                        a.n_outputs, s.scratch, c);
}

void run_moe_ffn(const Step& s, const MatmulArgs& a, const kernels::ExecContext& c) {
  const auto& w = *static_cast<const kernels::MoeFfnWeights*>(s.state);
  // Input 5 is the score bias, or (gpt-oss, inputs 5..8 all present) the router's bias.
  kernels::MoeBiases biases;
  const float* score_bias = static_cast<const float*>(s.in[5]);
  if (s.in[8] != nullptr) {
    biases = {score_bias, static_cast<const float*>(s.in[6]), static_cast<const float*>(s.in[7]),
              static_cast<const float*>(s.in[8])};
    score_bias = nullptr;
  }
  kernels::moe_ffn(w, static_cast<const float*>(s.in[0]), a.rows, static_cast<float*>(s.out[0]),
                   s.scratch, c, score_bias, biases);
}

// rms_norm into scratch, then the LM head with argmax: logits are never written.
void run_norm_matmul_argmax(const Step& s, const NormMatmulArgmaxArgs& a,
                            const kernels::ExecContext& c) {
  auto* normed = static_cast<float*>(s.scratch);
  kernels::rms_norm(static_cast<const float*>(s.in[0]), static_cast<const float*>(s.in[1]), normed,
                    a.rows, a.cols, a.eps, c);
  c.sync();
  void* mm_scratch = static_cast<char*>(s.scratch) + a.normed_bytes;
  kernels::matmul_argmax(weight_of(s), normed, a.rows, static_cast<int32_t*>(s.out[0]), mm_scratch,
                         c);
}

void run_take_rows(const Step& s, const TakeRowsArgs& a, const kernels::ExecContext& c) {
  const auto* rows = static_cast<const int32_t*>(s.in[1]);
  Range r = split_range(a.rows, c.tid, c.nth);
  for (int64_t i = r.begin; i < r.end; ++i) {
    char* dst = static_cast<char*>(s.out[0]) + i * a.row_bytes;
    int32_t src = rows[i];
    if (src < 0 || src >= a.src_rows) {
      std::memset(dst, 0, a.row_bytes);  // inert padded row
    } else {
      std::memcpy(dst, static_cast<const char*>(s.in[0]) + src * a.row_bytes, a.row_bytes);
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
      set_kernel<run_embedding>(s, {.vocab = table.shape()[0],
                                    .dim = table.shape()[1],
                                    .tokens = g.type(node.inputs[1]).shape.numel(),
                                    .table_dtype = table.dtype()});
      s.in[0] = table.data();
      return true;
    }
    case Op::Matmul:
    case Op::MatmulAdd: {
      const PackedWeight& w = ctx.weights->packed(g.node(node.inputs[1].node));
      const int64_t m = g.type(node.inputs[0]).shape.rows();
      set_kernel<run_matmul>(s, {.rows = m});
      s.state = const_cast<PackedWeight*>(&w);
      if (node.op == Op::Matmul) s.in[2] = nullptr;
      l.scratch_bytes = kernels::matmul_scratch_bytes(w, m);
      return true;
    }
    case Op::MatmulSplit: {
      const PackedWeight& w = ctx.weights->packed(g.node(node.inputs[1].node));
      const int64_t m = g.type(node.inputs[0]).shape.rows();
      KILN_CHECK(node.outputs.size() <= static_cast<size_t>(kMaxSplitOutputs),
                 "matmul_split supports at most {} outputs", kMaxSplitOutputs);
      MatmulSplitArgs args{
          .rows = m, .n_outputs = static_cast<int32_t>(node.outputs.size()), .cols = {}};
      for (size_t i = 0; i < node.outputs.size(); ++i) args.cols[i] = node.outputs[i].shape.cols();
      set_kernel<run_matmul_split>(s, args);
      s.state = const_cast<PackedWeight*>(&w);
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
      moe->gating = node.attrs.get_int("sigmoid", 0) != 0        ? kernels::MoeGating::kSigmoid
                    : node.attrs.get_int("softmax_topk", 0) != 0 ? kernels::MoeGating::kSoftmaxTopK
                                                                 : kernels::MoeGating::kSoftmax;
      moe->swiglu_alpha = static_cast<float>(node.attrs.get_float("swiglu_alpha", 0.0));
      moe->swiglu_limit = static_cast<float>(node.attrs.get_float("swiglu_limit", 0.0));
      moe->n_groups = static_cast<int>(node.attrs.get_int("n_groups", 1));
      moe->topk_groups = static_cast<int>(node.attrs.get_int("topk_groups", 1));
      moe->routed_scale = static_cast<float>(node.attrs.get_float("routed_scale", 1.0));
      const int64_t m = g.type(node.inputs[0]).shape.rows();
      set_kernel<run_moe_ffn>(s, {.rows = m});
      s.state = moe.get();
      l.scratch_bytes = kernels::moe_ffn_scratch_bytes(*moe, m);
      l.owned = std::move(moe);
      return true;
    }
    case Op::NormMatmulArgmax: {
      const PackedWeight& w = ctx.weights->packed(g.node(node.inputs[2].node));
      const ValueType& x = g.type(node.inputs[0]);
      const int64_t m = x.shape.rows();
      const size_t normed_bytes = align64(sizeof(float) * m * x.shape.cols());
      set_kernel<run_norm_matmul_argmax>(s, {.rows = m,
                                             .cols = x.shape.cols(),
                                             .eps = static_cast<float>(node.attrs.get_float("eps")),
                                             .normed_bytes = normed_bytes});
      s.state = const_cast<PackedWeight*>(&w);
      l.scratch_bytes = normed_bytes + kernels::matmul_argmax_scratch_bytes(w, m, ctx.n_threads);
      return true;
    }
    case Op::TakeRows: {
      const ValueType& x = g.type(node.inputs[0]);
      set_kernel<run_take_rows>(s, {.rows = node.outputs[0].shape[0],
                                    .row_bytes = dtype_bytes(x.dtype, x.shape.cols()),
                                    .src_rows = x.shape.rows()});
      return true;
    }
    default:
      return false;
  }
}

}  // namespace kiln::graph::lowering
