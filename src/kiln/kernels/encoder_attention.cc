// The encoder attention's scalar reference and ISA dispatch (encoder_attention.h).
#include "kiln/kernels/encoder_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kiln/kernels/dispatch.h"
#include "kiln/kernels/encoder_attention_isa.h"

namespace kiln::kernels {
namespace detail {
namespace {

// The same steps as the vector tiers, one score at a time.
void encoder_attention_ref(const float* q, const float* k, const float* v, int64_t stride,
                           int64_t len, int64_t hd, float scale, float* out, int64_t out_stride,
                           float* ws) {
  float* s = ws;
  for (int64_t i = 0; i < len; ++i) {
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t j = 0; j < len; ++j) {
      float acc = 0.0f;
      for (int64_t d = 0; d < hd; ++d) acc = std::fma(q[i * stride + d], k[j * stride + d], acc);
      s[j] = acc * scale;
      mx = std::max(mx, s[j]);
    }
    float sum = 0.0f;
    for (int64_t j = 0; j < len; ++j) {
      s[j] = std::exp(s[j] - mx);
      sum += s[j];
    }
    const float inv = 1.0f / sum;
    for (int64_t d = 0; d < hd; ++d) {
      float acc = 0.0f;
      for (int64_t j = 0; j < len; ++j) acc = std::fma(s[j] * inv, v[j * stride + d], acc);
      out[i * out_stride + d] = acc;
    }
  }
}

}  // namespace

constinit const EncoderAttentionFn kEncoderAttentionScalar = encoder_attention_ref;

}  // namespace detail

size_t encoder_attention_workspace_floats(int64_t max_len, int64_t head_dim) {
  const int64_t lp = detail::encoder_padded_len(max_len);
  return static_cast<size_t>(head_dim * lp + detail::kEncoderQueryBlock * lp);
}

void encoder_attention(const float* q, const float* k, const float* v, int64_t stride, int64_t len,
                       int64_t head_dim, float scale, float* out, int64_t out_stride,
                       float* workspace) {
  detail::pick_isa(detail::kEncoderAttentionScalar, detail::kEncoderAttentionAvx2,
                   detail::kEncoderAttentionAvx512)(q, k, v, stride, len, head_dim, scale, out,
                                                    out_stride, workspace);
}

}  // namespace kiln::kernels
