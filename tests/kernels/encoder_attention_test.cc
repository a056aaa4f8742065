#include "kiln/kernels/encoder_attention.h"

#include <cmath>

#include "kernel_test_util.h"

namespace kiln::kernels {
namespace {

using testing::all_close;
using testing::random_floats;

// softmax(q k^T * scale) v in float64, rows `stride` apart.
std::vector<float> reference(const std::vector<float>& qkv, int64_t stride, int64_t len, int64_t hd,
                             int64_t k_off, int64_t v_off, double scale) {
  std::vector<float> out(len * hd);
  for (int64_t i = 0; i < len; ++i) {
    std::vector<double> s(len);
    double mx = -1e300, sum = 0;
    for (int64_t j = 0; j < len; ++j) {
      double acc = 0;
      for (int64_t d = 0; d < hd; ++d)
        acc += double(qkv[i * stride + d]) * qkv[j * stride + k_off + d];
      s[j] = acc * scale;
      mx = std::max(mx, s[j]);
    }
    for (double& x : s) sum += (x = std::exp(x - mx));
    for (int64_t d = 0; d < hd; ++d) {
      double acc = 0;
      for (int64_t j = 0; j < len; ++j) acc += s[j] / sum * qkv[j * stride + v_off + d];
      out[i * hd + d] = static_cast<float>(acc);
    }
  }
  return out;
}

class EncoderAttentionTest : public testing::IsaTest {};

TEST_P(EncoderAttentionTest, MatchesFloat64Softmax) {
  for (int64_t hd : {1, 8, 17, 32, 64}) {
    for (int64_t len : {1, 2, 3, 4, 5, 15, 16, 17, 33, 130}) {
      // One fused [len, 3 * hd + 5] row layout: q, k, v slices and a gap, as BERT's QKV.
      const int64_t stride = 3 * hd + 5;
      const auto qkv = random_floats(len * stride, 7 * hd + len, -2.0f, 2.0f);
      std::vector<float> ws(encoder_attention_workspace_floats(len + 9, hd), 123.0f);
      std::vector<float> out(len * (hd + 3), -5.0f);
      const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
      encoder_attention(qkv.data(), qkv.data() + hd, qkv.data() + 2 * hd, stride, len, hd, scale,
                        out.data(), hd + 3, ws.data());
      std::vector<float> got(len * hd);
      for (int64_t i = 0; i < len; ++i) {
        for (int64_t d = 0; d < hd; ++d) got[i * hd + d] = out[i * (hd + 3) + d];
        for (int64_t d = hd; d < hd + 3; ++d)
          ASSERT_EQ(out[i * (hd + 3) + d], -5.0f) << "wrote past the head";
      }
      ASSERT_TRUE(all_close(got, reference(qkv, stride, len, hd, hd, 2 * hd, scale), 2e-5, 2e-6))
          << "hd " << hd << " len " << len;
    }
  }
}

// Large score gaps: the softmax must subtract the maximum (no overflow to inf / NaN).
TEST_P(EncoderAttentionTest, LargeScoresStayFinite) {
  const int64_t hd = 16, len = 20, stride = 3 * hd;
  auto qkv = random_floats(len * stride, 3, -30.0f, 30.0f);
  std::vector<float> ws(encoder_attention_workspace_floats(len, hd)), out(len * hd);
  encoder_attention(qkv.data(), qkv.data() + hd, qkv.data() + 2 * hd, stride, len, hd, 1.0f,
                    out.data(), hd, ws.data());
  for (float x : out) ASSERT_TRUE(std::isfinite(x));
  EXPECT_TRUE(all_close(out, reference(qkv, stride, len, hd, hd, 2 * hd, 1.0), 1e-4, 1e-4));
}

KILN_INSTANTIATE_ISA_TESTS(EncoderAttentionTest);

}  // namespace
}  // namespace kiln::kernels
