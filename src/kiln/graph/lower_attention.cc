// Lowering of the KV-cache ops: kv_write, attention (with its replay-time update hook that
// re-partitions the work from this step's sequence lengths) and the fused
// qk-norm + RoPE + kv-write.
#include <fmt/format.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "kiln/base/error.h"
#include "kiln/graph/lowering_internal.h"
#include "kiln/kernels/attention.h"
#include "kiln/kernels/kv_cache.h"
#include "kiln/kernels/qk_norm_rope_kv_write.h"
#include "kiln/kernels/rope.h"

namespace kiln::graph::lowering {
namespace {

// The state input is the whole pool; kernels::kv_layer_view knows where each layer lives.
kernels::KvLayerView layer_view(const KvGeometry& kv, void* pool, int layer) {
  return kernels::kv_layer_view(kv, pool, layer);
}

struct KvWriteState {
  kernels::KvLayerView view;
};

void run_kv_write(const Step& s, const KvWriteArgs& a, const kernels::ExecContext& c) {
  const auto* st = static_cast<const KvWriteState*>(s.state);
  kernels::kv_write(static_cast<const float*>(s.in[1]), static_cast<const float*>(s.in[2]),
                    static_cast<const int32_t*>(s.in[3]), a.tokens, st->view, c);
}

struct AttentionState {
  kernels::AttentionParams params;
  kernels::AttentionInputs inputs;
  // Refilled by the update hook at every replay; plans that never run at the same time
  // share it (SharedLowering).
  std::shared_ptr<kernels::AttentionWork> work;
};

// Replay-time update hook: the split of keys across threads depends on this step's lengths.
void update_attention(Step& s, int n_threads) {
  auto* st = static_cast<AttentionState*>(s.state);
  kernels::attention_plan(st->params, st->inputs, n_threads, st->work.get());
}

void run_attention(const Step& s, const NoArgs& /*all in the state*/,
                   const kernels::ExecContext& c) {
  auto* st = static_cast<AttentionState*>(s.state);
  kernels::attention_run(st->params, st->inputs, *st->work, s.scratch, c);
}

struct QkNormRopeKvState {
  kernels::KvLayerView view;
  std::vector<float> inv_freq;
};

// The frequency factors (input 8, null when absent) are read at run time, as rope does
// (lower_elementwise.cc says why).
void run_qk_norm_rope_kv_write(const Step& s, const QkNormRopeKvWriteArgs& a,
                               const kernels::ExecContext& c) {
  const auto* st = static_cast<const QkNormRopeKvState*>(s.state);
  kernels::RopeSpec rope;
  rope.head_dim = a.head_dim;
  rope.n_rot = a.n_rot;
  rope.neox = a.neox;
  rope.inv_freq = st->inv_freq.data();
  rope.freq_factors = static_cast<const float*>(s.in[8]);
  kernels::qk_norm_rope_kv_write(
      static_cast<const float*>(s.in[0]), static_cast<const float*>(s.in[1]),
      static_cast<const float*>(s.in[2]), static_cast<const float*>(s.in[3]),
      static_cast<const float*>(s.in[4]), a.eps, static_cast<const int32_t*>(s.in[5]), rope,
      static_cast<const int32_t*>(s.in[7]), a.tokens, a.n_heads, static_cast<float*>(s.out[0]),
      st->view, c);
}

}  // namespace

bool lower_attention(const LowerContext& ctx, const Node& node, Lowered& l) {
  Step& s = l.step;
  const Graph& g = *ctx.graph;
  switch (node.op) {
    case Op::KvWrite: {
      auto st = std::make_shared<KvWriteState>();
      st->view = layer_view(ctx.kv, const_cast<void*>(s.in[0]),
                            static_cast<int>(node.attrs.get_int("layer")));
      set_kernel<run_kv_write>(s, {.tokens = g.type(node.inputs[1]).shape.rows()});
      s.state = st.get();
      l.owned = st;
      return true;
    }
    case Op::Attention: {
      auto st = std::make_shared<AttentionState>();
      const ValueType& q = g.type(node.inputs[0]);
      const ValueType& table = g.type(node.inputs[2]);
      kernels::AttentionParams& p = st->params;
      p.n_heads = static_cast<int>(node.attrs.get_int("n_heads"));
      p.n_kv_heads = static_cast<int>(node.attrs.get_int("n_kv_heads"));
      p.head_dim = static_cast<int>(node.attrs.get_int("head_dim"));
      p.window = static_cast<int>(node.attrs.get_int("window"));
      p.scale = static_cast<float>(node.attrs.get_float("scale"));
      p.softcap = static_cast<float>(node.attrs.get_float("softcap", 0.0));
      p.max_pages_per_seq = static_cast<int>(table.shape[1]);
      kernels::AttentionInputs& in = st->inputs;
      in.q = static_cast<const float*>(s.in[0]);
      in.block_table = static_cast<const int32_t*>(s.in[2]);
      in.seq_lens = static_cast<const int32_t*>(s.in[3]);
      in.positions = static_cast<const int32_t*>(s.in[4]);
      in.token_seq = static_cast<const int32_t*>(s.in[5]);
      in.T = q.shape.rows();
      in.S = table.shape[0];
      in.kv = layer_view(ctx.kv, const_cast<void*>(s.in[1]),
                         static_cast<int>(node.attrs.get_int("layer")));
      in.out = static_cast<float*>(s.out[0]);
      if (node.inputs.size() > 6) in.sinks = static_cast<const float*>(s.in[6]);
      kernels::AttentionLimits limits;
      limits.max_tokens = in.T;
      limits.max_threads = ctx.n_threads;
      if (ctx.shared != nullptr) {
        // max_tokens only bounds the capacity (work list, scratch layout): a work sized for
        // the largest plan serves the smaller ones, and the scratch below is sized to match.
        limits.max_tokens = std::max(in.T, ctx.shared->max_tokens());
        const std::string key = fmt::format(
            "attention node {}: heads {}/{} dim {} window {} pages {} tokens {} threads {}", s.node,
            p.n_heads, p.n_kv_heads, p.head_dim, p.window, p.max_pages_per_seq, limits.max_tokens,
            limits.max_threads);
        st->work = ctx.shared->get<kernels::AttentionWork>(
            key, [&] { return new kernels::AttentionWork(p, limits); });
      } else {
        st->work = std::make_shared<kernels::AttentionWork>(p, limits);
      }
      l.scratch_bytes = kernels::attention_scratch_bytes(p, limits);
      set_kernel<run_attention>(s, {});
      s.update = update_attention;
      s.state = st.get();
      l.owned = st;
      return true;
    }
    case Op::QkNormRopeKvWrite: {
      auto st = std::make_shared<QkNormRopeKvState>();
      const int head_dim = static_cast<int>(node.attrs.get_int("head_dim"));
      st->view = layer_view(ctx.kv, const_cast<void*>(s.in[6]),
                            static_cast<int>(node.attrs.get_int("layer")));
      const int n_rot = static_cast<int>(node.attrs.get_int("n_rot", head_dim));
      st->inv_freq = kernels::rope_inv_freq(n_rot, node.attrs.get_float("freq_base"));
      set_kernel<run_qk_norm_rope_kv_write>(
          s, {.tokens = g.type(node.inputs[0]).shape.rows(),
              .n_heads = static_cast<int32_t>(node.attrs.get_int("n_heads")),
              .head_dim = head_dim,
              .n_rot = n_rot,
              .neox = node.attrs.get_int("neox") != 0,
              .eps = static_cast<float>(node.attrs.get_float("eps"))});
      s.state = st.get();
      l.owned = st;
      return true;
    }
    default:
      return false;
  }
}

}  // namespace kiln::graph::lowering
