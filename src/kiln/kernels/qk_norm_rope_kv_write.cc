// The fused kernel is a composition of the per-row ISA routines (norm_isa.h, rope_isa.h,
// kv_cache_isa.h): the vector work happens there, and calling the same code is what makes the
// fused result bit-identical to the unfused one.
#include "kiln/kernels/qk_norm_rope_kv_write.h"

#include "kiln/base/error.h"
#include "kiln/kernels/dispatch.h"
#include "kiln/kernels/kv_cache_isa.h"
#include "kiln/kernels/norm_isa.h"
#include "kiln/kernels/rope.h"
#include "kiln/kernels/rope_isa.h"

namespace kiln::kernels {

void qk_norm_rope_kv_write(const float* q, const float* k, const float* v, const float* q_norm_w,
                           const float* k_norm_w, float eps, const int32_t* positions,
                           const RopeSpec& rope_spec, const int32_t* slots, int64_t T, int n_heads,
                           float* q_out, const KvLayerView& view, const ExecContext& ctx) {
  check_kv_view(view);
  const int hd = view.head_dim;
  const int kh = view.n_kv_heads;
  KILN_CHECK(rope_spec.head_dim == hd,
             "qk_norm_rope_kv_write: rope head_dim {} is not the cache's head_dim {}",
             rope_spec.head_dim, hd);
  float freq_scratch[kRopeMaxHeadDim / 2];
  const float* freq = rope_frequencies(rope_spec, freq_scratch);  // checks head_dim and n_rot
  const int n_rot = rope_spec.rotated();
  const bool neox = rope_spec.neox;
  KILN_CHECK(T >= 0 && n_heads > 0, "qk_norm_rope_kv_write: bad shape T={} n_heads={}", T, n_heads);
  KILN_CHECK((q_norm_w == nullptr) == (k_norm_w == nullptr),
             "qk_norm_rope_kv_write: give both norm weights or neither");
  KILN_CHECK(eps >= 0.0f, "qk_norm_rope_kv_write: eps must be >= 0, got {}", eps);
  const int64_t n_slots = view.n_slots();
  for (int64_t t = 0; t < T; ++t)
    KILN_CHECK(slots[t] < n_slots,
               "qk_norm_rope_kv_write: slot {} of row {} is outside the pool ({} slots)", slots[t],
               t, n_slots);

  const auto& norm = detail::norm_fns();
  const auto& rope = detail::rope_fns();
  const auto& kv = detail::kv_fns();
  const bool q8 = view.dtype == KvDtype::Q8;
  const int64_t q_cols = static_cast<int64_t>(n_heads) * hd;
  const int64_t kv_cols = static_cast<int64_t>(kh) * hd;
  Range r = detail::share(T, ctx, 1, (2048 + q_cols - 1) / q_cols);
  float cos_t[kRopeMaxHeadDim / 2], sin_t[kRopeMaxHeadDim / 2];
  float k_row[kRopeMaxHeadDim];
  for (int64_t t = r.begin; t < r.end; ++t) {
    rope.cos_sin(positions[t], freq, cos_t, sin_t, n_rot / 2);
    const float* qt = q + t * q_cols;
    float* qo = q_out + t * q_cols;
    if (q_norm_w != nullptr) {
      for (int h = 0; h < n_heads; ++h)
        norm.rms_norm_row(qt + h * hd, q_norm_w, qo + h * hd, hd, eps);
      qt = qo;
    }
    rope.rotate_heads(qt, qo, n_heads, hd, n_rot, neox, cos_t, sin_t);

    if (slots[t] < 0) continue;
    const int64_t base = static_cast<int64_t>(slots[t]) * kv_cols;
    for (int h = 0; h < kh; ++h) {
      const float* kt = k + t * kv_cols + h * hd;
      if (k_norm_w != nullptr) {
        norm.rms_norm_row(kt, k_norm_w, k_row, hd, eps);
        kt = k_row;
      }
      rope.rotate_heads(kt, k_row, 1, hd, n_rot, neox, cos_t, sin_t);
      if (q8) {
        view.k_scale[slots[t] * kh + h] = kv.to_q8_block(k_row, view.k8 + base + h * hd, hd);
        view.v_scale[slots[t] * kh + h] =
            kv.to_q8_block(v + t * kv_cols + h * hd, view.v8 + base + h * hd, hd);
      } else {
        kv.to_f16_row(k_row, view.k + base + h * hd, hd);
      }
    }
    if (!q8) kv.to_f16_row(v + t * kv_cols, view.v + base, kv_cols);
  }
}

}  // namespace kiln::kernels
