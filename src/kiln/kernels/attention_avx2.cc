#include "kiln/kernels/simd_avx2.h"
#include "kiln/kernels/simd_math.h"

namespace kiln::kernels {
namespace {

struct AttnAvx2 : Avx2 {
  // The elementwise softcap's vector tanh, for the attention-logit cap.
  static F tanh(F x) { return tanh_v<Avx2>(x); }
  // Lane i of the result = the sum of v[i]'s 8 lanes, for 8 vectors at once. Every input goes
  // through the same tree whatever its position (d, d+2 within each 4-lane group; then the two
  // pairs; then the 128-bit halves), so a sum depends only on its own vector.
  [[gnu::always_inline]] static F reduce_lanes(const F* v) {
    F a[4], b[2];
    for (int i = 0; i < 4; ++i)
      a[i] = _mm256_add_ps(_mm256_unpacklo_ps(v[2 * i], v[2 * i + 1]),
                           _mm256_unpackhi_ps(v[2 * i], v[2 * i + 1]));
    for (int i = 0; i < 2; ++i) {
      __m256d x = _mm256_castps_pd(a[2 * i]), y = _mm256_castps_pd(a[2 * i + 1]);
      b[i] = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(x, y)),
                           _mm256_castpd_ps(_mm256_unpackhi_pd(x, y)));
    }
    return _mm256_add_ps(_mm256_permute2f128_ps(b[0], b[1], 0x20),
                         _mm256_permute2f128_ps(b[0], b[1], 0x31));
  }
};

}  // namespace
}  // namespace kiln::kernels

#include "kiln/kernels/attention_simd.h"

namespace kiln::kernels::detail {
constinit const AttentionFns kAttentionAvx2 = AttentionSimd<AttnAvx2>::table();
}  // namespace kiln::kernels::detail
