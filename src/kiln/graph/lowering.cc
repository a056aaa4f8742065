#include "kiln/graph/lowering.h"

#include "kiln/base/error.h"
#include "kiln/graph/lowering_internal.h"

namespace kiln::graph {
namespace {

// Inputs that lowering reads as packed matmul weights rather than as raw tensors.
bool is_packed_weight_slot(Op op, size_t input) {
  switch (op) {
    case Op::Matmul:
    case Op::MatmulAdd:
    case Op::MatmulSplit:
      return input == 1;
    case Op::NormMatmulArgmax:
      return input == 2;
    case Op::MoeFfn:
      return input >= 1 && input <= 4;  // not the score bias, an f32 vector
    default:
      return false;
  }
}

}  // namespace

bool output_is_view(const Node& node) { return node.op == Op::Reshape; }

Lowered lower_node(const LowerContext& ctx, int node_index) {
  const Graph& g = *ctx.graph;
  const Node& node = g.node(node_index);
  KILN_CHECK(!node.is_source() && !output_is_view(node), "node {} ({}) has nothing to lower",
             node_index, op_name(node.op));
  KILN_CHECK(node.inputs.size() <= Step::kMaxInputs && node.outputs.size() <= Step::kMaxOutputs,
             "node {} ({}) has too many operands", node_index, op_name(node.op));
  Lowered l;
  Step& s = l.step;
  s.node = node_index;
  for (size_t i = 0; i < node.inputs.size(); ++i) {
    const Node& src = g.node(node.inputs[i].node);
    if (src.op == Op::Param) {
      if (!is_packed_weight_slot(node.op, i)) s.in[i] = ctx.weights->raw(src).data();
    } else {
      s.in[i] = ctx.buffer(
          node.inputs[i]);  // activations, graph inputs; a token carries the state's address
    }
  }
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    if (node.outputs[i].dtype != DType::Token)
      s.out[i] = ctx.buffer(Value{node_index, static_cast<int32_t>(i)});
  }
  if (lowering::lower_elementwise(ctx, node, l) || lowering::lower_gemm(ctx, node, l) ||
      lowering::lower_attention(ctx, node, l) || lowering::lower_collective(ctx, node, l)) {
    return l;
  }
  fail("no kernel for op '{}' (node {})", op_name(node.op), node_index);
}

}  // namespace kiln::graph
