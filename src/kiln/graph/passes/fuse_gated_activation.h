// fuse_gated_activation: the gate of a gated MLP in one pass instead of two:
//   %g = gelu(%a) ; %h = mul(%g, %b)   =>   %h = gelu_mul(%a, %b)      (also mul(%b, %g))
//   %g = silu(%a) ; %h = mul(%g, %b)   =>   %h = silu_mul(%a, %b)
// Refuses: an activation with another use (its value would still be needed, computing it
// twice), a mul whose other operand is broadcast ([cols]) rather than the same shape, and
// rewrites that would break the effect order.
// Does NOT: fuse other activations (softcap) or a mul of two activations in any other order
// than gate first.
#pragma once
#include "kiln/graph/passes/pass.h"

namespace kiln::graph {

PassResult run_fuse_gated_activation(Graph& graph, const PassOptions& options);

}  // namespace kiln::graph
