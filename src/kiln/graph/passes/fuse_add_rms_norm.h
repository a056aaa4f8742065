// fuse_add_rms_norm: a residual add followed by an RMS norm of the sum becomes one pass over
// the rows that writes both the sum (still used as the next residual) and the normed value:
//   %s = add(%a, %b)  ;  %n = rms_norm(%s, %w) {eps}   =>   %s, %n = add_rms_norm(%a, %b, %w) {eps}
// Other uses of %s read output 0.
// Refuses: an add with a broadcast bias (b of shape [cols]), and anything whose rewrite would
// break the effect order. A side-effecting op between the add and the norm does not block it:
// both are pure, so moving them past a KV write changes nothing.
// Does NOT: fuse a sum normed twice into one node (the second norm stays an rms_norm).
#pragma once
#include "kiln/graph/passes/pass.h"

namespace kiln::graph {

PassResult run_fuse_add_rms_norm(Graph& graph, const PassOptions& options);

}  // namespace kiln::graph
