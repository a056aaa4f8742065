#include "kiln/graph/op_table.h"

#include <iterator>

namespace kiln::graph {
namespace {

constexpr OpInfo kOps[] = {
#define KILN_OP_INFO(name, text, arity, outs, group, inplace) \
  {text, arity, outs, OpGroup::group, inplace},
    KILN_OPS(KILN_OP_INFO)
#undef KILN_OP_INFO
};

}  // namespace

const OpInfo& op_info(Op op) { return kOps[static_cast<int>(op)]; }

std::optional<Op> op_from_name(std::string_view name) {
  for (size_t i = 0; i < std::size(kOps); ++i) {
    if (kOps[i].name == name) return static_cast<Op>(i);
  }
  return std::nullopt;
}

int optional_inputs(Op op) {
  // moe_ffn: a score bias, or gpt-oss's four biases (shape inference tells them apart).
  if (op == Op::MoeFfn) return 4;
  return op == Op::Rope || op == Op::QkNormRopeKvWrite || op == Op::Attention || op == Op::LayerNorm
             ? 1
             : 0;
}

int effect_input(Op op) {
  switch (op) {
    case Op::KvWrite:
      return 0;
    case Op::Attention:
      return 1;
    case Op::QkNormRopeKvWrite:
      return 6;
    default:
      return -1;
  }
}

}  // namespace kiln::graph
