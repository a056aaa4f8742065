// 16-lane float vector operations for the AVX-512 kernels, in the shape the generic kernel
// bodies (*_simd.h) expect. Include ONLY from *_avx512.cc files. Everything is in an anonymous
// namespace: a function built with AVX-512 flags must never become the copy a baseline caller
// links to.
#pragma once
// GCC 12's own AVX-512 headers start intrinsics from `__m512 __Y = __Y;` and then warn about
// it when inlined (GCC bug 105593); the warning says nothing about our code.
#if defined(__GNUC__) && !defined(__clang__)  // clang has no -Wmaybe-uninitialized, nor the bug
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <cstdint>

namespace kiln::kernels {
namespace {

struct Avx512 {
  using F = __m512;
  static constexpr int W = 16;

  static __mmask16 tail_mask(int n) { return static_cast<__mmask16>((1u << n) - 1u); }

  static F zero() { return _mm512_setzero_ps(); }
  static F set1(float v) { return _mm512_set1_ps(v); }
  static F load(const float* p) { return _mm512_loadu_ps(p); }
  // Loads the first n (0 <= n <= W) lanes, zero elsewhere; never touches memory beyond p + n.
  static F load_n(const float* p, int n) { return _mm512_maskz_loadu_ps(tail_mask(n), p); }
  static void store(float* p, F v) { _mm512_storeu_ps(p, v); }
  static void store_n(float* p, F v, int n) { _mm512_mask_storeu_ps(p, tail_mask(n), v); }

  static F load_f16(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static F load_f16_n(const uint16_t* p, int n) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(tail_mask(n), p));
  }
  static void store_f16(uint16_t* p, F v) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p),
                        _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  static void store_f16_n(uint16_t* p, F v, int n) {
    _mm256_mask_storeu_epi16(p, tail_mask(n),
                             _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }

  // Rounds the first n lanes to integers (nearest even: the MXCSR default), saturates them to
  // int8 and stores them; the q8 KV cache's conversion.
  static void store_i8_n(int8_t* p, F v, int n) {
    _mm512_mask_cvtsepi32_storeu_epi8(p, tail_mask(n), _mm512_cvtps_epi32(v));
  }
  // W int8 values widened to floats (exact).
  static F load_i8(const int8_t* p) {
    return _mm512_cvtepi32_ps(
        _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
  }

  static F add(F a, F b) { return _mm512_add_ps(a, b); }
  static F sub(F a, F b) { return _mm512_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm512_mul_ps(a, b); }
  static F div(F a, F b) { return _mm512_div_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm512_fmadd_ps(a, b, c); }    // a*b + c
  static F fnma(F a, F b, F c) { return _mm512_fnmadd_ps(a, b, c); }  // c - a*b
  // max/min return the second operand when either is NaN: pass the data second so NaN
  // propagates through clamps.
  static F max(F a, F b) { return _mm512_max_ps(a, b); }
  static F min(F a, F b) { return _mm512_min_ps(a, b); }
  static F abs(F a) { return _mm512_abs_ps(a); }
  static F copysign(F mag, F sgn) {
    const __m512i sign = _mm512_set1_epi32(static_cast<int>(0x80000000u));
    return _mm512_castsi512_ps(
        _mm512_ternarylogic_epi32(_mm512_castps_si512(mag), _mm512_castps_si512(sgn), sign, 0xd8));
  }
  // Lanes where a < b take `yes`, others `no`.
  static F select_lt(F a, F b, F yes, F no) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_LT_OQ), no, yes);
  }
  // Bit i set where lane i of a > b (resp. ==); false for NaN.
  static uint32_t gt_mask(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_GT_OQ); }
  static uint32_t eq_mask(F a, F b) { return _mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ); }
  // Swaps lanes 2i and 2i+1 (for RoPE on adjacent pairs).
  static F swap_pairs(F a) { return _mm512_permute_ps(a, 0xb1); }

  // Fixed-order horizontal reductions (the same tree every call, so results are reproducible).
  static float hsum(F v) {
    __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    b = _mm_add_ps(b, _mm_movehl_ps(b, b));
    b = _mm_add_ss(b, _mm_movehdup_ps(b));
    return _mm_cvtss_f32(b);
  }
  static float hmax(F v) {
    __m256 a = _mm256_max_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 b = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    b = _mm_max_ps(b, _mm_movehl_ps(b, b));
    b = _mm_max_ss(b, _mm_movehdup_ps(b));
    return _mm_cvtss_f32(b);
  }

  // exp(x): Cody-Waite reduction x = n*ln2 + r, degree-5 polynomial for e^r on |r| <= ln2/2
  // (Cephes coefficients), then scalef multiplies by 2^n with correct overflow to inf and
  // underflow through subnormals to 0. About 1-2 ulp. NaN propagates.
  static F exp(F x) {
    x = _mm512_max_ps(_mm512_set1_ps(-104.0f), x);
    x = _mm512_min_ps(_mm512_set1_ps(89.0f), x);
    F n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    F r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
    F z = _mm512_mul_ps(r, r);
    F y = _mm512_set1_ps(1.9875691500e-4f);
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.3981999507e-3f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(8.3334519073e-3f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(4.1665795894e-2f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.6666665459e-1f));
    y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(5.0000001201e-1f));
    y = _mm512_fmadd_ps(y, z, r);
    y = _mm512_add_ps(y, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(y, n);
  }

  // cos and sin of angle = pos * inv_freq[i] for i in [0, n), the angle formed and reduced in
  // double precision so large positions keep full accuracy; written as float.
  static void cos_sin(double pos, const float* inv_freq, float* cos_out, float* sin_out, int n) {
    for (int i = 0; i < n; i += 8) {
      int m = n - i < 8 ? n - i : 8;
      __mmask8 k = static_cast<__mmask8>((1u << m) - 1u);
      __m512d a = _mm512_mul_pd(_mm512_set1_pd(pos),
                                _mm512_cvtps_pd(_mm256_maskz_loadu_ps(k, inv_freq + i)));
      __m512d c, s;
      sincos_pd(a, &s, &c);
      _mm256_mask_storeu_ps(cos_out + i, k, _mm512_cvtpd_ps(c));
      _mm256_mask_storeu_ps(sin_out + i, k, _mm512_cvtpd_ps(s));
    }
  }

  // sin and cos in double: q = round(x * 2/pi), r = x - q*pi/2 with pi/2 split in two doubles
  // (FMA keeps the reduction accurate far beyond the angles RoPE produces), Taylor polynomials
  // on |r| <= pi/4, then the quadrant q mod 4 picks and signs the results.
  static void sincos_pd(__m512d x, __m512d* sin_out, __m512d* cos_out) {
    __m512d q = _mm512_roundscale_pd(_mm512_mul_pd(x, _mm512_set1_pd(0.6366197723675814)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512d r = _mm512_fnmadd_pd(q, _mm512_set1_pd(1.5707963267948966), x);
    r = _mm512_fnmadd_pd(q, _mm512_set1_pd(6.123233995736766e-17), r);
    __m512d z = _mm512_mul_pd(r, r);
    __m512d ps = _mm512_set1_pd(1.0 / 6227020800.0);
    ps = _mm512_fmadd_pd(ps, z, _mm512_set1_pd(-1.0 / 39916800.0));
    ps = _mm512_fmadd_pd(ps, z, _mm512_set1_pd(1.0 / 362880.0));
    ps = _mm512_fmadd_pd(ps, z, _mm512_set1_pd(-1.0 / 5040.0));
    ps = _mm512_fmadd_pd(ps, z, _mm512_set1_pd(1.0 / 120.0));
    ps = _mm512_fmadd_pd(ps, z, _mm512_set1_pd(-1.0 / 6.0));
    __m512d sr = _mm512_fmadd_pd(_mm512_mul_pd(ps, z), r, r);
    __m512d pc = _mm512_set1_pd(-1.0 / 87178291200.0);
    pc = _mm512_fmadd_pd(pc, z, _mm512_set1_pd(1.0 / 479001600.0));
    pc = _mm512_fmadd_pd(pc, z, _mm512_set1_pd(-1.0 / 3628800.0));
    pc = _mm512_fmadd_pd(pc, z, _mm512_set1_pd(1.0 / 40320.0));
    pc = _mm512_fmadd_pd(pc, z, _mm512_set1_pd(-1.0 / 720.0));
    pc = _mm512_fmadd_pd(pc, z, _mm512_set1_pd(1.0 / 24.0));
    pc = _mm512_fmadd_pd(pc, z, _mm512_set1_pd(-0.5));
    __m512d cr = _mm512_fmadd_pd(pc, z, _mm512_set1_pd(1.0));
    // q is integral and small, so the low bits of q + 1.5*2^52 hold q as a two's-complement int.
    __m512i qi = _mm512_castpd_si512(_mm512_add_pd(q, _mm512_set1_pd(6755399441055744.0)));
    __mmask8 odd = _mm512_test_epi64_mask(qi, _mm512_set1_epi64(1));
    __m512d s = _mm512_mask_blend_pd(odd, sr, cr);
    __m512d c = _mm512_mask_blend_pd(odd, cr, sr);
    __m512i sin_sign = _mm512_slli_epi64(_mm512_and_si512(qi, _mm512_set1_epi64(2)), 62);
    __m512i cos_sign = _mm512_slli_epi64(
        _mm512_and_si512(_mm512_add_epi64(qi, _mm512_set1_epi64(1)), _mm512_set1_epi64(2)), 62);
    *sin_out = _mm512_castsi512_pd(_mm512_xor_si512(_mm512_castpd_si512(s), sin_sign));
    *cos_out = _mm512_castsi512_pd(_mm512_xor_si512(_mm512_castpd_si512(c), cos_sign));
  }
};

}  // namespace
}  // namespace kiln::kernels
