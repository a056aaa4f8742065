// inplace: decides which outputs may be written into the buffer of their input 0, so the
// memory planner gives both one slot. A node gets the attribute {inplace=1} when
//   - its op is in-place capable in the op table (elementwise, norms, rope, reshape, gated acts),
//   - input 0 is an intermediate (not a param, state or input: those buffers are not ours),
//   - input 0 has this node as its only use (it dies here) and is not a graph output,
//   - output 0 has the same dtype and byte size as input 0, and is not a graph output
//     (outputs get their own buffers).
// Every earlier {inplace} attribute is recomputed, so the pass is idempotent.
// Does NOT rewrite any op or change what is computed, alias any input other than input 0, or
// touch mutating ops (a KV write already updates the state in place, never a copy).
#pragma once
#include "kiln/graph/passes/pass.h"

namespace kiln::graph {

PassResult run_inplace(Graph& graph, const PassOptions& options);

// True when output 0 of node `node` shares input 0's buffer (as the inplace pass decided).
bool is_inplace(const Node& node);

}  // namespace kiln::graph
