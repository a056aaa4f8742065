// noop_elim: removes ops that leave their input unchanged.
//   reshape(x) to x's own shape   => x
//   reshape(reshape(x))           => reshape(x)   (a chain keeps only its last shape)
//   copy(x)                       => x            (SSA values are immutable; a copy adds nothing)
//   cast(x) to x's own dtype      => x
//   scale(x) {factor=1}           => x
// Does NOT: fold arithmetic identities beyond these (add of zeros, mul by ones), touch
// side-effecting ops, or remove nodes other than the ones it bypasses.
#pragma once
#include "kiln/graph/passes/pass.h"

namespace kiln::graph {

PassResult run_noop_elim(Graph& graph, const PassOptions& options);

}  // namespace kiln::graph
