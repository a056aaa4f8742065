#include "kiln/kernels/simd_avx512.h"
#include "kiln/kernels/simd_math.h"

namespace kiln::kernels {
namespace {

struct AttnAvx512 : Avx512 {
  // The elementwise softcap's vector tanh, for the attention-logit cap.
  static F tanh(F x) { return tanh_v<Avx512>(x); }
  // Lane i of the result = the sum of v[i]'s 16 lanes, for 16 vectors at once (about a
  // quarter of the work of 16 hsums). Every input goes through the same tree whatever its
  // position (d, d+2 within each 4-lane group; then the two pairs; then 128-bit halves of each
  // 256-bit half; then the halves), so a sum depends only on its own vector.
  [[gnu::always_inline]] static F reduce_lanes(const F* v) {
    F a[8], b[4], c[2];
    for (int i = 0; i < 8; ++i)
      a[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]),
                           _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
    for (int i = 0; i < 4; ++i) {
      __m512d x = _mm512_castps_pd(a[2 * i]), y = _mm512_castps_pd(a[2 * i + 1]);
      b[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)),
                           _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
    }
    // b[i]'s 128-bit lane L holds, for v[4i..4i+3], the sums of their lanes 4L..4L+3.
    for (int i = 0; i < 2; ++i)
      c[i] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                           _mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_add_ps(_mm512_shuffle_f32x4(c[0], c[1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(c[0], c[1], _MM_SHUFFLE(3, 1, 3, 1)));
  }
};

}  // namespace
}  // namespace kiln::kernels

#include "kiln/kernels/attention_simd.h"

namespace kiln::kernels::detail {
constinit const AttentionFns kAttentionAvx512 = AttentionSimd<AttnAvx512>::table();
}  // namespace kiln::kernels::detail
