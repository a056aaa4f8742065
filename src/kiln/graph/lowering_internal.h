// Per-op-group lowering functions, shared by lowering.cc only. Each returns false when the
// op is not in its group. Pointers (step.in/out) are filled by lower_node before the call.
#pragma once
#include "kiln/graph/lowering.h"

namespace kiln::graph::lowering {

bool lower_elementwise(const LowerContext& ctx, const Node& node, Lowered& l);
bool lower_gemm(const LowerContext& ctx, const Node& node, Lowered& l);
bool lower_attention(const LowerContext& ctx, const Node& node, Lowered& l);
bool lower_collective(const LowerContext& ctx, const Node& node, Lowered& l);

}  // namespace kiln::graph::lowering
