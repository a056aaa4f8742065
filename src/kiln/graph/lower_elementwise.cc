// Lowering of elementwise, norm, RoPE and reduction ops: row-parallel kernels whose only
// static choice is the sizes (the ISA is dispatched inside each kernel).
#include <cstring>
#include <memory>
#include <vector>

#include "kiln/base/error.h"
#include "kiln/graph/lowering_internal.h"
#include "kiln/kernels/elementwise.h"
#include "kiln/kernels/norm.h"
#include "kiln/kernels/reduce.h"
#include "kiln/kernels/rope.h"

namespace kiln::graph::lowering {
namespace {

const float* fin(const Step& s, int i) { return static_cast<const float*>(s.in[i]); }
float* fout(const Step& s, int i) { return static_cast<float*>(s.out[i]); }

void run_add(const Step& s, const BinaryArgs& a, const kernels::ExecContext& c) {
  if (a.row_broadcast) {
    kernels::add_row_broadcast(fin(s, 0), fin(s, 1), fout(s, 0), a.rows, a.cols, c);
  } else {
    kernels::add(fin(s, 0), fin(s, 1), fout(s, 0), a.rows * a.cols, c);
  }
}
void run_mul(const Step& s, const ElementwiseArgs& a, const kernels::ExecContext& c) {
  kernels::mul(fin(s, 0), fin(s, 1), fout(s, 0), a.count, c);
}
// mul(a[rows, cols], b[cols]): b is one row broadcast over a's rows (shape inference allows it,
// as for add). There is no broadcast mul kernel, so each thread multiplies whole rows of its
// share, one kernels::mul call per row on that thread alone (exact IEEE products: the same
// bits as any split).
void run_mul_row_broadcast(const Step& s, const BinaryArgs& a, const kernels::ExecContext& c) {
  const int64_t cols = a.cols;
  const Range r = split_range(a.rows, c.tid, c.nth);
  const kernels::ExecContext alone;
  for (int64_t i = r.begin; i < r.end; ++i)
    kernels::mul(fin(s, 0) + i * cols, fin(s, 1), fout(s, 0) + i * cols, cols, alone);
}
void run_scale(const Step& s, const ScaleArgs& a, const kernels::ExecContext& c) {
  kernels::scale(fin(s, 0), a.factor, fout(s, 0), a.count, c);
}
void run_gelu(const Step& s, const ElementwiseArgs& a, const kernels::ExecContext& c) {
  kernels::gelu_tanh(fin(s, 0), fout(s, 0), a.count, c);
}
void run_gelu_erf(const Step& s, const ElementwiseArgs& a, const kernels::ExecContext& c) {
  kernels::gelu_erf(fin(s, 0), fout(s, 0), a.count, c);
}
void run_silu(const Step& s, const ElementwiseArgs& a, const kernels::ExecContext& c) {
  kernels::silu(fin(s, 0), fout(s, 0), a.count, c);
}
void run_softcap(const Step& s, const SoftcapArgs& a, const kernels::ExecContext& c) {
  kernels::softcap(fin(s, 0), a.cap, fout(s, 0), a.count, c);
}
void run_gelu_mul(const Step& s, const ElementwiseArgs& a, const kernels::ExecContext& c) {
  kernels::gelu_mul(fin(s, 0), fin(s, 1), fout(s, 0), a.count, c);
}
void run_silu_mul(const Step& s, const ElementwiseArgs& a, const kernels::ExecContext& c) {
  kernels::silu_mul(fin(s, 0), fin(s, 1), fout(s, 0), a.count, c);
}
void run_rms_norm(const Step& s, const NormArgs& a, const kernels::ExecContext& c) {
  kernels::rms_norm(fin(s, 0), fin(s, 1), fout(s, 0), a.rows, a.cols, a.eps, c);
}
void run_add_rms_norm(const Step& s, const NormArgs& a, const kernels::ExecContext& c) {
  kernels::add_rms_norm(fin(s, 0), fin(s, 1), fin(s, 2), fout(s, 0), fout(s, 1), a.rows, a.cols,
                        a.eps, c);
}
// The bias is input 2, or (a LayerNorm without one: Command-R's) the zeros the step's state
// holds: the kernel always adds one, and adding zeros leaves every value as it is.
void run_layer_norm(const Step& s, const NormArgs& a, const kernels::ExecContext& c) {
  const auto* zeros = static_cast<const std::vector<float>*>(s.state);
  const float* bias = zeros != nullptr ? zeros->data() : fin(s, 2);
  kernels::layer_norm(fin(s, 0), fin(s, 1), bias, fout(s, 0), a.rows, a.cols, a.eps, c);
}
// The frequency factors (input 2, null when the node has none) are read here, at run time:
// they are a weight like any other input, so eager and graph mode read the same bytes the
// same way, and dividing n_rot/2 frequencies per call costs nothing next to the rows.
void run_rope(const Step& s, const RopeArgs& a, const kernels::ExecContext& c) {
  const auto* table = static_cast<const std::vector<float>*>(s.state);
  kernels::RopeSpec spec;
  spec.head_dim = a.head_dim;
  spec.n_rot = a.n_rot;
  spec.neox = a.neox;
  spec.inv_freq = table->data();
  spec.freq_factors = fin(s, 2);
  kernels::rope(fin(s, 0), static_cast<const int32_t*>(s.in[1]), spec, fout(s, 0), a.rows,
                a.n_heads, c);
}
void run_argmax(const Step& s, const ArgmaxArgs& a, const kernels::ExecContext& c) {
  kernels::argmax_rows(fin(s, 0), a.rows, a.cols, static_cast<int32_t*>(s.out[0]), c);
}
void run_copy(const Step& s, const CopyArgs& a, const kernels::ExecContext& c) {
  if (c.tid == 0) std::memcpy(s.out[0], s.in[0], a.bytes);
}

}  // namespace

bool lower_elementwise(const LowerContext& ctx, const Node& node, Lowered& l) {
  Step& s = l.step;
  const ValueType& out = node.outputs[0];
  const ValueType& in0 = ctx.graph->type(node.inputs[0]);
  switch (node.op) {
    case Op::Add: {
      const ValueType& in1 = ctx.graph->type(node.inputs[1]);
      set_kernel<run_add>(s, {.rows = out.shape.rows(),
                              .cols = out.shape.cols(),
                              .row_broadcast = in1.shape != in0.shape});  // a bias
      return true;
    }
    case Op::Mul:
      if (ctx.graph->type(node.inputs[1]).shape != in0.shape) {
        set_kernel<run_mul_row_broadcast>(
            s, {.rows = out.shape.rows(), .cols = out.shape.cols(), .row_broadcast = true});
        return true;
      }
      set_kernel<run_mul>(s, {.count = out.shape.numel()});
      return true;
    case Op::Scale:
      set_kernel<run_scale>(s, {.count = out.shape.numel(),
                                .factor = static_cast<float>(node.attrs.get_float("factor"))});
      return true;
    case Op::Gelu:
      set_kernel<run_gelu>(s, {.count = out.shape.numel()});
      return true;
    case Op::GeluErf:
      set_kernel<run_gelu_erf>(s, {.count = out.shape.numel()});
      return true;
    case Op::Silu:
      set_kernel<run_silu>(s, {.count = out.shape.numel()});
      return true;
    case Op::Softcap:
      set_kernel<run_softcap>(
          s, {.count = out.shape.numel(), .cap = static_cast<float>(node.attrs.get_float("cap"))});
      return true;
    case Op::GeluMul:
      set_kernel<run_gelu_mul>(s, {.count = out.shape.numel()});
      return true;
    case Op::SiluMul:
      set_kernel<run_silu_mul>(s, {.count = out.shape.numel()});
      return true;
    case Op::RmsNorm:
    case Op::AddRmsNorm: {
      const NormArgs args{.rows = in0.shape.rows(),
                          .cols = in0.shape.cols(),
                          .eps = static_cast<float>(node.attrs.get_float("eps"))};
      if (node.op == Op::RmsNorm) {
        set_kernel<run_rms_norm>(s, args);
      } else {
        set_kernel<run_add_rms_norm>(s, args);
      }
      return true;
    }
    case Op::LayerNorm: {
      const int64_t cols = in0.shape.cols();
      set_kernel<run_layer_norm>(s, {.rows = in0.shape.rows(),
                                     .cols = cols,
                                     .eps = static_cast<float>(node.attrs.get_float("eps"))});
      if (node.inputs.size() < 3) {
        auto zeros = std::make_shared<std::vector<float>>(static_cast<size_t>(cols), 0.0f);
        s.state = zeros.get();
        l.owned = zeros;
      }
      return true;
    }
    case Op::Rope: {
      const int head_dim = static_cast<int>(node.attrs.get_int("head_dim"));
      const int n_rot = static_cast<int>(node.attrs.get_int("n_rot", head_dim));
      auto table = std::make_shared<std::vector<float>>(
          kernels::rope_inv_freq(n_rot, node.attrs.get_float("freq_base")));
      set_kernel<run_rope>(s, {.rows = in0.shape.rows(),
                               .n_heads = static_cast<int32_t>(in0.shape.cols() / head_dim),
                               .head_dim = head_dim,
                               .n_rot = n_rot,
                               .neox = node.attrs.get_int("neox") != 0});
      s.state = table.get();
      l.owned = table;
      return true;
    }
    case Op::Argmax:
      set_kernel<run_argmax>(s, {.rows = in0.shape.rows(), .cols = in0.shape.cols()});
      return true;
    case Op::Copy:
      set_kernel<run_copy>(s, {.bytes = dtype_bytes(out.dtype, out.shape.numel())});
      return true;
    default:
      return false;
  }
}

}  // namespace kiln::graph::lowering
