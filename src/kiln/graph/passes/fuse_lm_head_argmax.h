// fuse_lm_head_argmax: greedy decoding only needs the index of the largest logit, so the final
// norm, the LM head and the argmax become one op that never writes the [T, vocab] logits:
//   %n = rms_norm(%x, %nw) {eps} ; %l = matmul(%n, %w) ; %t = argmax(%l)
//     =>   %t = norm_matmul_argmax(%x, %nw, %w) {eps}
// Refuses: logits or the normed value with any other use or returned as graph outputs (sampling
// other than greedy needs the logits), and a norm over anything but rows of a [T, D] matrix.
// Does NOT: fuse a softcap or scale between the matmul and the argmax (they change no argmax
// only when monotonic; that rule is not written yet), or an argmax without the norm.
#pragma once
#include "kiln/graph/passes/pass.h"

namespace kiln::graph {

PassResult run_fuse_lm_head_argmax(Graph& graph, const PassOptions& options);

}  // namespace kiln::graph
