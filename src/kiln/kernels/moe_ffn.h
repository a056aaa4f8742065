// The mixture-of-experts FFN of Qwen3-MoE, Mixtral and DeepSeek V2/V3, for T rows at once:
//   logits = x W_router^T;  scores p = softmax(logits) (or sigmoid(logits), DeepSeek V3);
//   the experts are chosen by p (+ the score bias, DeepSeek V3's e_score_correction_bias),
//   within the topk_groups best of n_groups equal groups of experts when n_groups > 1 (a
//   group's score: its best expert's under softmax gating, DeepSeek V2; the sum of its two best
//   under sigmoid gating, DeepSeek V3); the top-k (ties: lowest index first) get weights p_j
//   (without the bias), divided by their sum when norm_topk_prob, times routed_scale;
//   y = sum_j w_j * down_j(silu(gate_j(x)) * up_j(x)), summed in rank order j = 0..k-1.
// gpt-oss: the router and every expert projection have biases (MoeBiases), the top-k are chosen
// by the logits and weighted by the softmax of their logits alone (kSoftmaxTopK), and the
// activation is the clamped SwiGLU: with g = min(gate, limit), u = clamp(up, -limit, limit),
// act = g * sigmoid(alpha * g) * (u + 1) (swiglu_limit > 0).
#pragma once
#include <cstddef>
#include <cstdint>

#include "kiln/kernels/exec_context.h"
#include "kiln/kernels/packed_experts.h"
#include "kiln/kernels/packed_weight.h"

namespace kiln::kernels {

// kSoftmaxTopK: the top-k by logit, weighted by the softmax over those k logits (gpt-oss).
enum class MoeGating { kSoftmax, kSigmoid, kSoftmaxTopK };
inline constexpr int kMaxMoeGroups = 64;

// How a row's experts are chosen and weighted (see the top of this file).
struct MoeRouting {
  int top_k = 1;
  bool norm_topk_prob = true;
  MoeGating gating = MoeGating::kSoftmax;
  int n_groups = 1;     // > 1: group-limited routing over n_groups equal groups
  int topk_groups = 1;  // the groups the top-k are chosen from
  float routed_scale = 1.0f;
};

struct MoeFfnWeights {
  const PackedWeight* router = nullptr;    // [E, D]
  const PackedExperts* gate_up = nullptr;  // E x [2F, D]: gate rows, then up rows
  const PackedExperts* down = nullptr;     // E x [D, F]
  int top_k = 1;
  bool norm_topk_prob = true;
  MoeGating gating = MoeGating::kSoftmax;
  int n_groups = 1;
  int topk_groups = 1;
  float routed_scale = 1.0f;
  // > 0: gpt-oss's clamped SwiGLU with this limit and swiglu_alpha (top of file); 0: silu.
  float swiglu_alpha = 0.0f;
  float swiglu_limit = 0.0f;

  MoeRouting routing() const {
    return {top_k, norm_topk_prob, gating, n_groups, topk_groups, routed_scale};
  }
};

// gpt-oss's biases, f32, each null when absent: router [E], gate and up [E, F], down [E, D].
// A bias is added to its projection's output before anything else reads it.
struct MoeBiases {
  const float* router = nullptr;
  const float* gate = nullptr;
  const float* up = nullptr;
  const float* down = nullptr;
};

// Scratch bytes (64-byte aligned, shared by the group) moe_ffn needs for m rows.
size_t moe_ffn_scratch_bytes(const MoeFfnWeights& w, int64_t m);

// y[m, D] = the MoE FFN of x[m, D]. x and y must not overlap. score_bias: f32[E] added to the
// scores for the choice only (null: none).
void moe_ffn(const MoeFfnWeights& w, const float* x, int64_t m, float* y, void* scratch,
             const ExecContext& ctx, const float* score_bias = nullptr,
             const MoeBiases& biases = {});

// gpt-oss's clamped SwiGLU over n values, in place into gate (scalar libm exp: the same bits on
// every ISA tier).
void swiglu_clamped(float* gate, const float* up, int64_t n, float alpha, float limit);

// The routing of one row (exposed for tests): `row` holds the router logits [n_experts] and is
// overwritten with their scores; `choice` ([n_experts] scratch) receives the scores the choice
// is made on; ids and weights receive the top_k experts in rank order.
void moe_route_row(float* row, int64_t n_experts, const MoeRouting& r, const float* score_bias,
                   float* choice, int32_t* ids, float* weights);

// Softmax routing without groups, bias or scale (Qwen3-MoE, Mixtral).
void moe_route_row(float* row, int64_t n_experts, int top_k, bool norm_topk_prob, int32_t* ids,
                   float* weights);

}  // namespace kiln::kernels
