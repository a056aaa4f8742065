#include "kiln/kernels/moe_ffn.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kiln/base/error.h"
#include "kiln/kernels/elementwise.h"
#include "kiln/kernels/matmul.h"

namespace kiln::kernels {
namespace {

size_t align64(size_t n) { return (n + 63) / 64 * 64; }

// Where each array lives in the scratch. Two matmul scratches alternate between consecutive
// expert matmuls: a matmul's threads leave without a barrier, so the next one may only reset a
// queue counter and quantize activations that no thread of the previous one still reads (its
// own barrier after quantizing proves the one before the previous has finished everywhere).
struct Layout {
  int64_t n_experts, d, f, k, slots;
  size_t mm[2], logits, choice, ids, weights, slot_of, count, start, row_of, expert_of, xy, g, u,
      end;
};

Layout layout(const MoeFfnWeights& w, int64_t m) {
  KILN_CHECK(w.router != nullptr && w.gate_up != nullptr && w.down != nullptr,
             "moe_ffn: missing weights");
  Layout L{};
  L.n_experts = w.router->n();
  L.d = w.router->k();
  KILN_CHECK(static_cast<int64_t>(w.gate_up->experts.size()) == L.n_experts &&
                 static_cast<int64_t>(w.down->experts.size()) == L.n_experts,
             "moe_ffn: router has {} experts, gate/up {}, down {}", L.n_experts,
             w.gate_up->experts.size(), w.down->experts.size());
  L.f = w.down->experts[0].k();
  L.k = w.top_k;
  KILN_CHECK(L.k >= 1 && L.k <= L.n_experts, "moe_ffn: top_k {} of {} experts", L.k, L.n_experts);
  KILN_CHECK(w.n_groups >= 1 && w.n_groups <= kMaxMoeGroups && L.n_experts % w.n_groups == 0 &&
                 w.topk_groups >= 1 && w.topk_groups <= w.n_groups &&
                 L.k <= w.topk_groups * (L.n_experts / w.n_groups),
             "moe_ffn: top_k {} from {} of {} groups of {} experts", L.k, w.topk_groups, w.n_groups,
             L.n_experts);
  L.slots = m * L.k;
  size_t mm_bytes = matmul_scratch_bytes(*w.router, m);
  for (int64_t e = 0; e < L.n_experts; ++e) {
    const PackedWeight& gu = w.gate_up->experts[e];
    const PackedWeight& dn = w.down->experts[e];
    KILN_CHECK(gu.k() == L.d && gu.n() == 2 * L.f && dn.k() == L.f && dn.n() == L.d,
               "moe_ffn: expert {} has gate/up [{}, {}] and down [{}, {}], expected [{}, {}] and "
               "[{}, {}]",
               e, gu.n(), gu.k(), dn.n(), dn.k(), 2 * L.f, L.d, L.d, L.f);
    mm_bytes = std::max({mm_bytes, matmul_scratch_bytes(gu, m), matmul_scratch_bytes(dn, m)});
  }
  const size_t sm = static_cast<size_t>(m), ss = static_cast<size_t>(L.slots);
  size_t at = 0;
  auto take = [&](size_t bytes) {
    const size_t here = at;
    at += align64(bytes);
    return here;
  };
  L.mm[0] = take(mm_bytes);
  L.mm[1] = take(mm_bytes);
  L.logits = take(4 * sm * static_cast<size_t>(L.n_experts));
  L.choice = take(4 * sm * static_cast<size_t>(L.n_experts));
  L.ids = take(4 * ss);
  L.weights = take(4 * ss);
  L.slot_of = take(4 * ss);
  L.count = take(4 * static_cast<size_t>(L.n_experts));
  L.start = take(4 * static_cast<size_t>(L.n_experts + 1));
  L.row_of = take(4 * ss);
  L.expert_of = take(4 * ss);
  L.xy = take(4 * ss * static_cast<size_t>(L.d));  // gathered inputs, later the expert outputs
  L.g = take(4 * ss * static_cast<size_t>(L.f));   // gate, then silu(gate) * up in place
  L.u = take(4 * ss * static_cast<size_t>(L.f));
  L.end = at;
  return L;
}

// a ranks above b: greater, NaN never above a number.
bool ranks_above(float a, float b) { return !std::isnan(a) && (std::isnan(b) || a > b); }

}  // namespace

namespace {

// Scores in place: softmax or sigmoid, in f32 with libm's exp, in expert order (the same bits on
// every ISA tier).
void score_row(float* row, int64_t n_experts, MoeGating gating) {
  if (gating == MoeGating::kSoftmaxTopK) return;  // chosen by the logits themselves
  if (gating == MoeGating::kSigmoid) {
    for (int64_t e = 0; e < n_experts; ++e) row[e] = 1.0f / (1.0f + std::exp(-row[e]));
    return;
  }
  float mx = row[0];
  for (int64_t e = 1; e < n_experts; ++e) mx = std::max(mx, row[e]);
  float sum = 0;
  for (int64_t e = 0; e < n_experts; ++e) {
    row[e] = std::exp(row[e] - mx);
    sum += row[e];
  }
  for (int64_t e = 0; e < n_experts; ++e) row[e] /= sum;
}

// The index of the best of values[0..n) not yet taken (taken[i] true), lowest index on ties.
int64_t best_untaken(const float* values, int64_t n, const bool* taken) {
  int64_t best = -1;
  for (int64_t i = 0; i < n; ++i) {
    if (taken[i]) continue;
    if (best < 0 || ranks_above(values[i], values[best])) best = i;
  }
  return best;
}

// Group-limited routing: `choice` of every expert outside the topk_groups best groups becomes
// -inf. A group's score is its best choice (softmax gating: DeepSeek V2) or the sum of its two
// best (sigmoid gating: DeepSeek V3).
void keep_best_groups(float* choice, int64_t n_experts, const MoeRouting& r) {
  const int64_t per_group = n_experts / r.n_groups;
  float group_score[kMaxMoeGroups];
  bool taken[kMaxMoeGroups] = {};
  for (int g = 0; g < r.n_groups; ++g) {
    const float* c = choice + g * per_group;
    float first = c[0], second = -INFINITY;
    for (int64_t i = 1; i < per_group; ++i) {
      if (ranks_above(c[i], first)) {
        second = first;
        first = c[i];
      } else if (ranks_above(c[i], second)) {
        second = c[i];
      }
    }
    group_score[g] = r.gating == MoeGating::kSigmoid && per_group > 1 ? first + second : first;
  }
  for (int j = 0; j < r.topk_groups; ++j)
    taken[best_untaken(group_score, r.n_groups, taken)] = true;
  for (int g = 0; g < r.n_groups; ++g) {
    if (taken[g]) continue;  // a chosen group keeps its experts
    std::fill(choice + g * per_group, choice + (g + 1) * per_group, -INFINITY);
  }
}

}  // namespace

void moe_route_row(float* row, int64_t n_experts, const MoeRouting& r, const float* score_bias,
                   float* choice, int32_t* ids, float* weights) {
  score_row(row, n_experts, r.gating);
  for (int64_t e = 0; e < n_experts; ++e) choice[e] = score_bias ? row[e] + score_bias[e] : row[e];
  if (r.n_groups > 1) keep_best_groups(choice, n_experts, r);
  // Top-k of the choice scores by selection (k is small); the strict comparison keeps the
  // lowest index on ties. The weights are the scores themselves, without the bias.
  for (int j = 0; j < r.top_k; ++j) {
    int32_t best = -1;
    for (int64_t e = 0; e < n_experts; ++e) {
      bool taken = false;
      for (int i = 0; i < j; ++i) taken |= ids[i] == e;
      if (taken) continue;
      if (best < 0 || ranks_above(choice[e], choice[best])) best = static_cast<int32_t>(e);
    }
    ids[j] = best;
    weights[j] = row[best];
  }
  if (r.gating == MoeGating::kSoftmaxTopK) {  // softmax over the chosen logits (rank order)
    float mx = weights[0];
    for (int j = 1; j < r.top_k; ++j) mx = std::max(mx, weights[j]);
    float sum = 0;
    for (int j = 0; j < r.top_k; ++j) {
      weights[j] = std::exp(weights[j] - mx);
      sum += weights[j];
    }
    for (int j = 0; j < r.top_k; ++j) weights[j] /= sum;
  }
  if (r.norm_topk_prob) {
    float total = 0;
    for (int j = 0; j < r.top_k; ++j) total += weights[j];
    for (int j = 0; j < r.top_k; ++j) weights[j] /= total;
  }
  if (r.routed_scale != 1.0f) {
    for (int j = 0; j < r.top_k; ++j) weights[j] *= r.routed_scale;
  }
}

void moe_route_row(float* row, int64_t n_experts, int top_k, bool norm_topk_prob, int32_t* ids,
                   float* weights) {
  MoeRouting r;
  r.top_k = top_k;
  r.norm_topk_prob = norm_topk_prob;
  moe_route_row(row, n_experts, r, nullptr, row, ids, weights);
}

void swiglu_clamped(float* gate, const float* up, int64_t n, float alpha, float limit) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = std::min(gate[i], limit);
    const float u = std::clamp(up[i], -limit, limit);
    gate[i] = g / (1.0f + std::exp(-alpha * g)) * (u + 1.0f);
  }
}

size_t moe_ffn_scratch_bytes(const MoeFfnWeights& w, int64_t m) {
  KILN_CHECK(m >= 0, "moe_ffn: negative row count {}", m);
  return layout(w, m).end;
}

void moe_ffn(const MoeFfnWeights& w, const float* x, int64_t m, float* y, void* scratch,
             const ExecContext& ctx, const float* score_bias, const MoeBiases& biases) {
  KILN_CHECK(m >= 0, "moe_ffn: negative row count {}", m);
  if (m == 0) return;
  KILN_CHECK(x != nullptr && y != nullptr && scratch != nullptr, "moe_ffn: null pointer");
  KILN_CHECK(reinterpret_cast<uintptr_t>(scratch) % 64 == 0, "moe_ffn: scratch must be 64-aligned");
  const Layout L = layout(w, m);
  auto* base = static_cast<uint8_t*>(scratch);
  auto at = [&](size_t off) { return base + off; };
  void* mm[2] = {at(L.mm[0]), at(L.mm[1])};
  auto* logits = reinterpret_cast<float*>(at(L.logits));
  auto* choice = reinterpret_cast<float*>(at(L.choice));
  auto* ids = reinterpret_cast<int32_t*>(at(L.ids));
  auto* weights = reinterpret_cast<float*>(at(L.weights));
  auto* slot_of = reinterpret_cast<int32_t*>(at(L.slot_of));
  auto* count = reinterpret_cast<int32_t*>(at(L.count));
  auto* start = reinterpret_cast<int32_t*>(at(L.start));
  auto* row_of = reinterpret_cast<int32_t*>(at(L.row_of));
  auto* expert_of = reinterpret_cast<int32_t*>(at(L.expert_of));
  auto* xy = reinterpret_cast<float*>(at(L.xy));
  auto* g = reinterpret_cast<float*>(at(L.g));
  auto* u = reinterpret_cast<float*>(at(L.u));
  const int64_t E = L.n_experts, D = L.d, F = L.f, K = L.k;

  // 1. Router logits.
  matmul(*w.router, x, m, logits, nullptr, mm[0], ctx);
  ctx.sync();
  // 2. Each row's experts and weights.
  const Range rows = split_range(m, ctx.tid, ctx.nth);
  const MoeRouting routing = w.routing();
  for (int64_t i = rows.begin; i < rows.end; ++i) {
    if (biases.router != nullptr)
      for (int64_t e = 0; e < E; ++e) logits[i * E + e] += biases.router[e];
    moe_route_row(logits + i * E, E, routing, score_bias, choice + i * E, ids + i * K,
                  weights + i * K);
  }
  ctx.sync();
  // 3. Slots grouped by expert, rows in increasing order within an expert (a few thousand
  // integer operations: one thread, no second barrier).
  if (ctx.tid == 0) {
    std::fill(count, count + E, 0);
    for (int64_t s = 0; s < L.slots; ++s) ++count[ids[s]];
    start[0] = 0;
    for (int64_t e = 0; e < E; ++e) start[e + 1] = start[e] + count[e];
    std::fill(count, count + E, 0);  // now the fill level of each expert
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < K; ++j) {
        const int32_t e = ids[i * K + j];
        const int32_t s = start[e] + count[e]++;
        slot_of[i * K + j] = s;
        row_of[s] = static_cast<int32_t>(i);
        expert_of[s] = e;
      }
    }
  }
  ctx.sync();
  // 4. Gather each slot's input row.
  const Range slots = split_range(L.slots, ctx.tid, ctx.nth);
  for (int64_t s = slots.begin; s < slots.end; ++s)
    std::memcpy(xy + s * D, x + static_cast<int64_t>(row_of[s]) * D, sizeof(float) * D);
  ctx.sync();
  // 5. gate and up of every used expert over its rows (one matmul, two outputs).
  int used = 0;
  for (int64_t e = 0; e < E; ++e) {
    const int64_t n = count[e], s0 = start[e];
    if (n == 0) continue;
    float* outs[2] = {g + s0 * F, u + s0 * F};
    const int64_t cols[2] = {F, F};
    matmul_split(w.gate_up->experts[e], xy + s0 * D, n, outs, cols, 2, mm[used++ % 2], ctx);
  }
  ctx.sync();
  // 6. silu(gate) * up, every slot at once (elementwise: each value depends on its inputs only);
  // gpt-oss: the expert's gate and up biases first, then its clamped SwiGLU.
  if (biases.gate != nullptr || biases.up != nullptr || w.swiglu_limit > 0) {
    for (int64_t s = slots.begin; s < slots.end; ++s) {
      const int64_t e = expert_of[s];
      float* gs = g + s * F;
      float* us = u + s * F;
      if (biases.gate != nullptr)
        for (int64_t c = 0; c < F; ++c) gs[c] += biases.gate[e * F + c];
      if (biases.up != nullptr)
        for (int64_t c = 0; c < F; ++c) us[c] += biases.up[e * F + c];
      if (w.swiglu_limit > 0) swiglu_clamped(gs, us, F, w.swiglu_alpha, w.swiglu_limit);
    }
    if (w.swiglu_limit <= 0) {
      ctx.sync();
      silu_mul(g, u, g, L.slots * F, ctx);
    }
  } else {
    silu_mul(g, u, g, L.slots * F, ctx);
  }
  ctx.sync();
  // 7. down of every used expert, into the rows the inputs were gathered to (read only in 5).
  used = 0;
  for (int64_t e = 0; e < E; ++e) {
    const int64_t n = count[e], s0 = start[e];
    if (n == 0) continue;
    matmul(w.down->experts[e], g + s0 * F, n, xy + s0 * D, nullptr, mm[used++ % 2], ctx);
  }
  ctx.sync();
  // 8. y = sum_j w_j * expert_j(x), in rank order.
  for (int64_t i = rows.begin; i < rows.end; ++i) {
    float* yr = y + i * D;
    for (int64_t j = 0; j < K; ++j) {
      const float wj = weights[i * K + j];
      const float* src = xy + static_cast<int64_t>(slot_of[i * K + j]) * D;
      if (biases.down != nullptr) {  // w_j * (down_j + its bias)
        const float* bias = biases.down + static_cast<int64_t>(ids[i * K + j]) * D;
        for (int64_t c = 0; c < D; ++c) yr[c] = (j == 0 ? 0.0f : yr[c]) + wj * (src[c] + bias[c]);
        continue;
      }
      if (j == 0) {
        for (int64_t c = 0; c < D; ++c) yr[c] = wj * src[c];
      } else {
        for (int64_t c = 0; c < D; ++c) yr[c] += wj * src[c];
      }
    }
  }
}

}  // namespace kiln::kernels
