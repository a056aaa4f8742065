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

void run_add(const Step& s, const kernels::ExecContext& c) {
  if (s.dim[2] != 0) {
    kernels::add_row_broadcast(fin(s, 0), fin(s, 1), fout(s, 0), s.dim[0], s.dim[1], c);
  } else {
    kernels::add(fin(s, 0), fin(s, 1), fout(s, 0), s.dim[0] * s.dim[1], c);
  }
}
void run_mul(const Step& s, const kernels::ExecContext& c) {
  kernels::mul(fin(s, 0), fin(s, 1), fout(s, 0), s.dim[0], c);
}
// mul(a[rows, cols], b[cols]): b is one row broadcast over a's rows (shape inference allows it,
// as for add). There is no broadcast mul kernel, so each thread multiplies whole rows of its
// share, one kernels::mul call per row on that thread alone (exact IEEE products: the same
// bits as any split).
void run_mul_row_broadcast(const Step& s, const kernels::ExecContext& c) {
  const int64_t rows = s.dim[0], cols = s.dim[1];
  const Range r = split_range(rows, c.tid, c.nth);
  const kernels::ExecContext alone;
  for (int64_t i = r.begin; i < r.end; ++i)
    kernels::mul(fin(s, 0) + i * cols, fin(s, 1), fout(s, 0) + i * cols, cols, alone);
}
void run_scale(const Step& s, const kernels::ExecContext& c) {
  kernels::scale(fin(s, 0), s.f[0], fout(s, 0), s.dim[0], c);
}
void run_gelu(const Step& s, const kernels::ExecContext& c) {
  kernels::gelu_tanh(fin(s, 0), fout(s, 0), s.dim[0], c);
}
void run_silu(const Step& s, const kernels::ExecContext& c) {
  kernels::silu(fin(s, 0), fout(s, 0), s.dim[0], c);
}
void run_softcap(const Step& s, const kernels::ExecContext& c) {
  kernels::softcap(fin(s, 0), s.f[0], fout(s, 0), s.dim[0], c);
}
void run_gelu_mul(const Step& s, const kernels::ExecContext& c) {
  kernels::gelu_mul(fin(s, 0), fin(s, 1), fout(s, 0), s.dim[0], c);
}
void run_silu_mul(const Step& s, const kernels::ExecContext& c) {
  kernels::silu_mul(fin(s, 0), fin(s, 1), fout(s, 0), s.dim[0], c);
}
void run_rms_norm(const Step& s, const kernels::ExecContext& c) {
  kernels::rms_norm(fin(s, 0), fin(s, 1), fout(s, 0), s.dim[0], s.dim[1], s.f[0], c);
}
void run_add_rms_norm(const Step& s, const kernels::ExecContext& c) {
  kernels::add_rms_norm(fin(s, 0), fin(s, 1), fin(s, 2), fout(s, 0), fout(s, 1), s.dim[0], s.dim[1],
                        s.f[0], c);
}
// The frequency factors (input 2, null when the node has none) are read here, at run time:
// they are a weight like any other input, so eager and graph mode read the same bytes the
// same way, and dividing n_rot/2 frequencies per call costs nothing next to the rows.
void run_rope(const Step& s, const kernels::ExecContext& c) {
  const auto* table = static_cast<const std::vector<float>*>(s.state);
  kernels::RopeSpec spec;
  spec.head_dim = static_cast<int>(s.dim[2]);
  spec.n_rot = static_cast<int>(s.dim[4]);
  spec.neox = s.dim[3] != 0;
  spec.inv_freq = table->data();
  spec.freq_factors = fin(s, 2);
  kernels::rope(fin(s, 0), static_cast<const int32_t*>(s.in[1]), spec, fout(s, 0), s.dim[0],
                static_cast<int>(s.dim[1]), c);
}
void run_argmax(const Step& s, const kernels::ExecContext& c) {
  kernels::argmax_rows(fin(s, 0), s.dim[0], s.dim[1], static_cast<int32_t*>(s.out[0]), c);
}
void run_copy(const Step& s, const kernels::ExecContext& c) {
  if (c.tid == 0) std::memcpy(s.out[0], s.in[0], static_cast<size_t>(s.dim[0]));
}

}  // namespace

bool lower_elementwise(const LowerContext& ctx, const Node& node, Lowered& l) {
  Step& s = l.step;
  const ValueType& out = node.outputs[0];
  const ValueType& in0 = ctx.graph->type(node.inputs[0]);
  switch (node.op) {
    case Op::Add: {
      const ValueType& in1 = ctx.graph->type(node.inputs[1]);
      s.run = run_add;
      s.dim[0] = out.shape.rows();
      s.dim[1] = out.shape.cols();
      s.dim[2] = in1.shape != in0.shape;  // bias broadcast over rows
      return true;
    }
    case Op::Mul:
      if (ctx.graph->type(node.inputs[1]).shape != in0.shape) {
        s.run = run_mul_row_broadcast;
        s.dim[0] = out.shape.rows();
        s.dim[1] = out.shape.cols();
        return true;
      }
      s.run = run_mul;
      s.dim[0] = out.shape.numel();
      return true;
    case Op::Scale:
      s.run = run_scale;
      s.dim[0] = out.shape.numel();
      s.f[0] = static_cast<float>(node.attrs.get_float("factor"));
      return true;
    case Op::Gelu:
      s.run = run_gelu;
      s.dim[0] = out.shape.numel();
      return true;
    case Op::Silu:
      s.run = run_silu;
      s.dim[0] = out.shape.numel();
      return true;
    case Op::Softcap:
      s.run = run_softcap;
      s.dim[0] = out.shape.numel();
      s.f[0] = static_cast<float>(node.attrs.get_float("cap"));
      return true;
    case Op::GeluMul:
      s.run = run_gelu_mul;
      s.dim[0] = out.shape.numel();
      return true;
    case Op::SiluMul:
      s.run = run_silu_mul;
      s.dim[0] = out.shape.numel();
      return true;
    case Op::RmsNorm:
      s.run = run_rms_norm;
      s.dim[0] = in0.shape.rows();
      s.dim[1] = in0.shape.cols();
      s.f[0] = static_cast<float>(node.attrs.get_float("eps"));
      return true;
    case Op::AddRmsNorm:
      s.run = run_add_rms_norm;
      s.dim[0] = in0.shape.rows();
      s.dim[1] = in0.shape.cols();
      s.f[0] = static_cast<float>(node.attrs.get_float("eps"));
      return true;
    case Op::Rope: {
      const int head_dim = static_cast<int>(node.attrs.get_int("head_dim"));
      const int n_rot = static_cast<int>(node.attrs.get_int("n_rot", head_dim));
      auto table = std::make_shared<std::vector<float>>(
          kernels::rope_inv_freq(n_rot, node.attrs.get_float("freq_base")));
      s.run = run_rope;
      s.state = table.get();
      l.owned = table;
      s.dim[0] = in0.shape.rows();
      s.dim[1] = in0.shape.cols() / head_dim;
      s.dim[2] = head_dim;
      s.dim[3] = node.attrs.get_int("neox");
      s.dim[4] = n_rot;
      return true;
    }
    case Op::Argmax:
      s.run = run_argmax;
      s.dim[0] = in0.shape.rows();
      s.dim[1] = in0.shape.cols();
      return true;
    case Op::Copy:
      s.run = run_copy;
      s.dim[0] = static_cast<int64_t>(dtype_bytes(out.dtype, out.shape.numel()));
      return true;
    default:
      return false;
  }
}

}  // namespace kiln::graph::lowering
