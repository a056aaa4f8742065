// Counts the patterns the fusion passes exist to remove, found by plain op matching written
// independently of the passes, so that a test can say "after the pipeline, nothing fusable is
// left" without trusting the passes' own matchers. Only the rules the passes promise are
// counted (same-shape adds, activations with one use, same-dtype plain-param projections, the
// per-head-normed q/k chain); what a pass documents it does NOT fuse is not a pattern here.
#pragma once
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "kiln/graph/ir.h"

namespace kiln::graph::testing {

inline std::map<std::string, int> unfused_patterns(const Graph& g) {
  const auto uses = g.use_counts();
  auto producer = [&](Value v) -> const Node& { return g.node(v.node); };
  auto single_use = [&](Value v) { return uses[v.node][v.index] == 1; };
  auto same_shapes = [&](const Node& n) { return g.type(n.inputs[0]) == g.type(n.inputs[1]); };
  auto plain_param = [&](Value v) {
    const Node& p = producer(v);
    return p.op == Op::Param && !p.attrs.has("concat") && !p.attrs.has("derive");
  };
  std::map<std::string, int> found;
  std::map<std::tuple<int, int, DType>, int> projections;  // (x node, x index, weight dtype)
  for (const Node& n : g.nodes()) {
    switch (n.op) {
      case Op::RmsNorm: {
        // add -> rms_norm
        const Node& p = producer(n.inputs[0]);
        if (p.op == Op::Add && same_shapes(p)) ++found["add+rms_norm"];
        break;
      }
      case Op::Mul:
        // gelu/silu (used once) * same-shape operand
        if (!same_shapes(n)) break;
        for (const Value& in : n.inputs) {
          const Op a = producer(in).op;
          if ((a == Op::Gelu || a == Op::Silu) && single_use(in)) {
            ++found["activation*mul"];
            break;
          }
        }
        break;
      case Op::Add:
        // matmul (used once) + same-shape residual
        if (!same_shapes(n)) break;
        for (const Value& in : n.inputs) {
          if (producer(in).op == Op::Matmul && single_use(in)) {
            ++found["matmul+add"];
            break;
          }
        }
        break;
      case Op::Matmul:
        if (plain_param(n.inputs[1]))
          ++projections[{n.inputs[0].node, n.inputs[0].index, g.type(n.inputs[1]).dtype}];
        break;
      case Op::KvWrite: {
        // kv_write(k = rope(reshape(rms_norm(..)))), the reshape absent for one head; a norm
        // over the whole projection (OLMo 2: its weight wider than a head) is not per head
        const Node& rope = producer(n.inputs[1]);
        if (rope.op != Op::Rope) break;
        const Node* back = &producer(rope.inputs[0]);
        if (back->op == Op::Reshape) back = &producer(back->inputs[0]);
        if (back->op == Op::RmsNorm &&
            g.type(back->inputs[1]).shape[0] == rope.attrs.get_int("head_dim"))
          ++found["qk_norm+rope+kv_write"];
        break;
      }
      case Op::Argmax: {
        // argmax(matmul(rms_norm(x)))
        const Node& mm = producer(n.inputs[0]);
        if (mm.op == Op::Matmul && producer(mm.inputs[0]).op == Op::RmsNorm)
          ++found["rms_norm+matmul+argmax"];
        break;
      }
      default:
        break;
    }
  }
  for (const auto& [key, n] : projections) {
    if (n >= 2) found["matmuls of one x"] += n;
  }
  return found;
}

}  // namespace kiln::graph::testing
