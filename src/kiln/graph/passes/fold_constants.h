// fold_constants: a pure op whose inputs are all plain params computes the same value every
// step, so it becomes a derived `param` that the runtime materializes once at load:
//
//   %w = param "w" : f32[8,4]
//   %r = reshape(%w) {shape=[4,8]} : f32[4,8]
// =>
//   %r = param "reshape(w)" {derive="reshape", args=["w"], shape=[4,8]} : f32[4,8]
//
// The recipe is the op name (`derive`), the names of its param inputs in order (`args`) and
// the op's own attributes. A name already taken gets a "#2", "#3"... suffix. Params that
// only fed folded ops are removed (the recipe names them; the runtime reads them from the file).
// Does NOT: fold ops whose inputs include a derived param (the runtime materializes one level;
// run noop_elim first so reshape chains are one reshape), fold ops with several outputs or side
// effects or that read state/inputs, or limit how large a derived param may be.
#pragma once
#include "kiln/graph/passes/pass.h"

namespace kiln::graph {

PassResult run_fold_constants(Graph& graph, const PassOptions& options);

}  // namespace kiln::graph
