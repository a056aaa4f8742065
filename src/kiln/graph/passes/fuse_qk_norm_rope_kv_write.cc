#include "kiln/graph/passes/fuse_qk_norm_rope_kv_write.h"

#include "kiln/base/error.h"
#include "kiln/graph/passes/rewrite.h"

namespace kiln::graph {
namespace {

// One of q or k: reshape -> rms_norm -> reshape -> rope, read back from the roped value. Either
// reshape may be missing: with one head (Gemma 3's single KV head) the model's [T*H, hd] view
// of [T, H*hd] is the same shape, and noop_elim removes both identity reshapes.
struct HeadChain {
  Value src;     // the projection's output [T, heads*hd]
  Value norm_w;  // [hd]
  Value positions;
  std::optional<Value> freq_factors;
  const Node* norm = nullptr;
  const Node* rope = nullptr;
  std::vector<int> nodes;  // rope, reshape (if any), rms_norm, reshape (if any)
};

std::optional<HeadChain> match_chain(const Rewriter& uses, Value roped) {
  const Graph& g = uses.graph();
  HeadChain c;
  c.rope = producer_if(g, roped, Op::Rope);
  if (!c.rope) return std::nullopt;
  c.nodes = {roped.node};
  const Value flat = c.rope->inputs[0];
  Value normed = flat;
  if (const Node* back = producer_if(g, flat, Op::Reshape)) {
    if (!uses.only_user_is(flat, roped.node)) return std::nullopt;
    normed = back->inputs[0];
    c.nodes.push_back(flat.node);
  }
  c.norm = producer_if(g, normed, Op::RmsNorm);
  if (!c.norm || !uses.only_user_is(normed, c.nodes.back())) return std::nullopt;
  c.nodes.push_back(normed.node);
  const Value heads = c.norm->inputs[0];
  c.src = heads;
  const Node* split = producer_if(g, heads, Op::Reshape);
  // A reshape before the norm belongs to the chain when it views the source's own type (else
  // the source is the reshape's output, e.g. a projection reshaped for some other reason).
  if (split && g.type(split->inputs[0]) == g.type(flat)) {
    if (!uses.only_user_is(heads, normed.node)) return std::nullopt;
    c.src = split->inputs[0];
    c.nodes.push_back(heads.node);
  }
  const int64_t hd = c.rope->attrs.get_int("head_dim");
  const ValueType& h = g.type(heads);
  // [T, H*hd] -> a view whose rows are single heads, [T, H, hd] or [T*H, hd] (the model's
  // head_norm) -> norm over hd -> back to exactly the source's shape. Any view whose last
  // dimension is hd normalizes every head on its own, which is what the fused kernel does.
  if (h.shape.cols() != hd || g.type(flat) != g.type(c.src)) return std::nullopt;
  c.norm_w = c.norm->inputs[1];
  c.positions = c.rope->inputs[1];
  if (c.rope->inputs.size() > 2) c.freq_factors = c.rope->inputs[2];
  return c;
}

int64_t rotated_dims(const Node& rope) {
  return rope.attrs.get_int("n_rot", rope.attrs.get_int("head_dim"));
}

// The fused kernel rotates q and k with one cos/sin table: everything that shapes it must
// agree, the frequency factors being the very same value (or absent from both).
bool same_rope_and_norm(const HeadChain& a, const HeadChain& b) {
  for (const char* key : {"head_dim", "neox"}) {
    if (a.rope->attrs.get_int(key) != b.rope->attrs.get_int(key)) return false;
  }
  return a.rope->attrs.get_float("freq_base") == b.rope->attrs.get_float("freq_base") &&
         rotated_dims(*a.rope) == rotated_dims(*b.rope) && a.freq_factors == b.freq_factors &&
         a.norm->attrs.get_float("eps") == b.norm->attrs.get_float("eps") &&
         a.positions == b.positions;
}

// Rewrites the match anchored at KV write node `w`; returns the fused node's id, or -1.
int fuse_at(Rewriter& rw, int w) {
  const Graph& g = rw.graph();
  if (g.node(w).op != Op::KvWrite) return -1;
  const Value k_roped = g.node(w).inputs[1];
  if (!rw.only_user_is(k_roped, w)) return -1;
  const auto k = match_chain(rw, k_roped);
  if (!k) return -1;
  const int64_t layer = g.node(w).attrs.get_int("layer");
  // The q chain: what an attention of the same layer reading this write's token attends with.
  // (A copy: a refused rewrite leaves the users as they are, but keep no reference across it.)
  const std::vector<Use> readers = rw.users(Value{w, 0});
  for (const Use& reader : readers) {
    if (reader.node < 0) continue;
    const Node& att = g.node(reader.node);
    if (att.op != Op::Attention || att.attrs.get_int("layer") != layer) continue;
    const Value q_roped = att.inputs[0];
    const auto q = match_chain(rw, q_roped);
    if (!q || !same_rope_and_norm(*q, *k)) continue;
    const Node& write = g.node(w);
    const int64_t hd = k->rope->attrs.get_int("head_dim");
    Node fused;
    fused.op = Op::QkNormRopeKvWrite;
    fused.inputs = {q->src,    k->src,       write.inputs[2], q->norm_w,
                    k->norm_w, k->positions, write.inputs[0], write.inputs[3]};
    fused.attrs.set("eps", k->norm->attrs.get_float("eps"));
    fused.attrs.set("head_dim", hd);
    fused.attrs.set("freq_base", k->rope->attrs.get_float("freq_base"));
    fused.attrs.set("neox", k->rope->attrs.get_int("neox"));
    fused.attrs.set("layer", layer);
    fused.attrs.set("n_heads", g.type(q->src).shape[1] / hd);
    fused.attrs.set("n_kv_heads", g.type(k->src).shape[1] / hd);
    // Partial rotary and frequency factors as the rope had them: the attribute and the
    // optional last input only when present, so the fused node reads like the ropes.
    if (k->rope->attrs.has("n_rot")) fused.attrs.set("n_rot", rotated_dims(*k->rope));
    if (k->freq_factors) fused.inputs.push_back(*k->freq_factors);
    std::vector<ValueType> in_types;
    for (const Value& v : fused.inputs) in_types.push_back(g.type(v));
    try {
      fused.outputs =
          infer_output_types(fused.op, in_types, fused.attrs);  // e.g. norm weight not [hd]
    } catch (const Error&) {
      continue;
    }
    std::vector<int> pattern = {w};
    pattern.insert(pattern.end(), q->nodes.begin(), q->nodes.end());
    pattern.insert(pattern.end(), k->nodes.begin(), k->nodes.end());
    const int id =
        rw.replace_with_fused(w, std::move(fused), {{q_roped, 0}, {Value{w, 0}, 1}}, pattern);
    if (id >= 0) return id;
  }
  return -1;
}

}  // namespace

PassResult run_fuse_qk_norm_rope_kv_write(Graph& g, const PassOptions&) {
  PassResult result;
  result.count("patterns_fused", rewrite_sweep(g, fuse_at));
  return result;
}

}  // namespace kiln::graph
