// 8-lane float vector operations for the AVX2 kernels, in the shape the generic kernel bodies
// (*_simd.h) expect. Include ONLY from *_avx2.cc files. Everything is in an anonymous
// namespace: a function built with AVX2 flags must never become the copy a baseline caller
// links to.
#pragma once
#include <immintrin.h>

#include <cstdint>
#include <cstring>

namespace kiln::kernels {
namespace {

struct Avx2 {
  using F = __m256;
  static constexpr int W = 8;

  static __m256i tail_mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }

  static F zero() { return _mm256_setzero_ps(); }
  static F set1(float v) { return _mm256_set1_ps(v); }
  static F load(const float* p) { return _mm256_loadu_ps(p); }
  // Loads the first n (0 <= n <= W) lanes, zero elsewhere; never touches memory beyond p + n.
  static F load_n(const float* p, int n) { return _mm256_maskload_ps(p, tail_mask(n)); }
  static void store(float* p, F v) { _mm256_storeu_ps(p, v); }
  static void store_n(float* p, F v, int n) { _mm256_maskstore_ps(p, tail_mask(n), v); }

  static F load_f16(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static F load_f16_n(const uint16_t* p, int n) {
    alignas(16) uint16_t tmp[8] = {};
    std::memcpy(tmp, p, static_cast<size_t>(n) * 2);
    return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(tmp)));
  }
  static void store_f16(uint16_t* p, F v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }
  static void store_f16_n(uint16_t* p, F v, int n) {
    alignas(16) uint16_t tmp[8];
    _mm_store_si128(reinterpret_cast<__m128i*>(tmp),
                    _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    std::memcpy(p, tmp, static_cast<size_t>(n) * 2);
  }

  // Rounds the first n lanes to integers (nearest even: the MXCSR default), saturates them to
  // int8 and stores them; the q8 KV cache's conversion.
  static void store_i8_n(int8_t* p, F v, int n) {
    const __m256i i = _mm256_cvtps_epi32(v);
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
    const __m128i b = _mm_packs_epi16(w, w);
    if (n == W) {
      _mm_storel_epi64(reinterpret_cast<__m128i*>(p), b);
      return;
    }
    alignas(16) int8_t tmp[16];
    _mm_store_si128(reinterpret_cast<__m128i*>(tmp), b);
    std::memcpy(p, tmp, static_cast<size_t>(n));
  }
  // W int8 values widened to floats (exact).
  static F load_i8(const int8_t* p) {
    return _mm256_cvtepi32_ps(
        _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }

  static F add(F a, F b) { return _mm256_add_ps(a, b); }
  static F sub(F a, F b) { return _mm256_sub_ps(a, b); }
  static F mul(F a, F b) { return _mm256_mul_ps(a, b); }
  static F div(F a, F b) { return _mm256_div_ps(a, b); }
  static F fma(F a, F b, F c) { return _mm256_fmadd_ps(a, b, c); }    // a*b + c
  static F fnma(F a, F b, F c) { return _mm256_fnmadd_ps(a, b, c); }  // c - a*b
  // max/min return the second operand when either is NaN: pass the data second so NaN
  // propagates through clamps.
  static F max(F a, F b) { return _mm256_max_ps(a, b); }
  static F min(F a, F b) { return _mm256_min_ps(a, b); }
  static F abs(F a) { return _mm256_and_ps(a, _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff))); }
  static F copysign(F mag, F sgn) {
    const F sign = _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(0x80000000u)));
    return _mm256_or_ps(_mm256_andnot_ps(sign, mag), _mm256_and_ps(sign, sgn));
  }
  // Lanes where a < b take `yes`, others `no`.
  static F select_lt(F a, F b, F yes, F no) {
    return _mm256_blendv_ps(no, yes, _mm256_cmp_ps(a, b, _CMP_LT_OQ));
  }
  // Bit i set where lane i of a > b (resp. ==); false for NaN.
  static uint32_t gt_mask(F a, F b) {
    return static_cast<uint32_t>(_mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_GT_OQ)));
  }
  static uint32_t eq_mask(F a, F b) {
    return static_cast<uint32_t>(_mm256_movemask_ps(_mm256_cmp_ps(a, b, _CMP_EQ_OQ)));
  }
  // Swaps lanes 2i and 2i+1 (for RoPE on adjacent pairs).
  static F swap_pairs(F a) { return _mm256_permute_ps(a, 0xb1); }

  // Fixed-order horizontal reductions (the same tree every call, so results are reproducible).
  static float hsum(F v) {
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    b = _mm_add_ps(b, _mm_movehl_ps(b, b));
    b = _mm_add_ss(b, _mm_movehdup_ps(b));
    return _mm_cvtss_f32(b);
  }
  static float hmax(F v) {
    __m128 b = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    b = _mm_max_ps(b, _mm_movehl_ps(b, b));
    b = _mm_max_ss(b, _mm_movehdup_ps(b));
    return _mm_cvtss_f32(b);
  }

  // exp(x): Cody-Waite reduction x = n*ln2 + r, degree-5 polynomial for e^r on |r| <= ln2/2
  // (Cephes coefficients), then y * 2^n applied as two multiplies by 2^(n/2)-ish factors so
  // overflow gives inf and underflow goes through subnormals to 0. About 1-2 ulp.
  static F exp(F x) {
    x = _mm256_max_ps(_mm256_set1_ps(-104.0f), x);
    x = _mm256_min_ps(_mm256_set1_ps(89.0f), x);
    F n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                          _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    F r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
    F z = _mm256_mul_ps(r, r);
    F y = _mm256_set1_ps(1.9875691500e-4f);
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
    y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
    y = _mm256_fmadd_ps(y, z, r);
    y = _mm256_add_ps(y, _mm256_set1_ps(1.0f));
    __m256i ni = _mm256_cvtps_epi32(n);  // in [-150, 128]
    __m256i n1 = _mm256_srai_epi32(ni, 1);
    __m256i n2 = _mm256_sub_epi32(ni, n1);
    const __m256i bias = _mm256_set1_epi32(127);
    F p1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    F p2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(y, p1), p2);
  }

  // cos and sin of angle = pos * inv_freq[i] for i in [0, n), the angle formed and reduced in
  // double precision so large positions keep full accuracy; written as float.
  static void cos_sin(double pos, const float* inv_freq, float* cos_out, float* sin_out, int n) {
    for (int i = 0; i < n; i += 4) {
      int m = n - i < 4 ? n - i : 4;
      alignas(16) float f[4] = {0, 0, 0, 0};
      std::memcpy(f, inv_freq + i, static_cast<size_t>(m) * 4);
      __m256d a = _mm256_mul_pd(_mm256_set1_pd(pos), _mm256_cvtps_pd(_mm_load_ps(f)));
      __m256d c, s;
      sincos_pd(a, &s, &c);
      alignas(16) float co[4], so[4];
      _mm_store_ps(co, _mm256_cvtpd_ps(c));
      _mm_store_ps(so, _mm256_cvtpd_ps(s));
      std::memcpy(cos_out + i, co, static_cast<size_t>(m) * 4);
      std::memcpy(sin_out + i, so, static_cast<size_t>(m) * 4);
    }
  }

  // sin and cos in double: q = round(x * 2/pi), r = x - q*pi/2 with pi/2 split in two doubles
  // (FMA keeps the reduction accurate far beyond the angles RoPE produces), Taylor polynomials
  // on |r| <= pi/4, then the quadrant q mod 4 picks and signs the results.
  static void sincos_pd(__m256d x, __m256d* sin_out, __m256d* cos_out) {
    __m256d q = _mm256_round_pd(_mm256_mul_pd(x, _mm256_set1_pd(0.6366197723675814)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256d r = _mm256_fnmadd_pd(q, _mm256_set1_pd(1.5707963267948966), x);
    r = _mm256_fnmadd_pd(q, _mm256_set1_pd(6.123233995736766e-17), r);
    __m256d z = _mm256_mul_pd(r, r);
    __m256d ps = _mm256_set1_pd(1.0 / 6227020800.0);
    ps = _mm256_fmadd_pd(ps, z, _mm256_set1_pd(-1.0 / 39916800.0));
    ps = _mm256_fmadd_pd(ps, z, _mm256_set1_pd(1.0 / 362880.0));
    ps = _mm256_fmadd_pd(ps, z, _mm256_set1_pd(-1.0 / 5040.0));
    ps = _mm256_fmadd_pd(ps, z, _mm256_set1_pd(1.0 / 120.0));
    ps = _mm256_fmadd_pd(ps, z, _mm256_set1_pd(-1.0 / 6.0));
    __m256d sr = _mm256_fmadd_pd(_mm256_mul_pd(ps, z), r, r);
    __m256d pc = _mm256_set1_pd(-1.0 / 87178291200.0);
    pc = _mm256_fmadd_pd(pc, z, _mm256_set1_pd(1.0 / 479001600.0));
    pc = _mm256_fmadd_pd(pc, z, _mm256_set1_pd(-1.0 / 3628800.0));
    pc = _mm256_fmadd_pd(pc, z, _mm256_set1_pd(1.0 / 40320.0));
    pc = _mm256_fmadd_pd(pc, z, _mm256_set1_pd(-1.0 / 720.0));
    pc = _mm256_fmadd_pd(pc, z, _mm256_set1_pd(1.0 / 24.0));
    pc = _mm256_fmadd_pd(pc, z, _mm256_set1_pd(-0.5));
    __m256d cr = _mm256_fmadd_pd(pc, z, _mm256_set1_pd(1.0));
    // q is integral and small, so the low bits of q + 1.5*2^52 hold q as a two's-complement int.
    __m256i qi = _mm256_castpd_si256(_mm256_add_pd(q, _mm256_set1_pd(6755399441055744.0)));
    __m256d odd =
        _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_and_si256(qi, _mm256_set1_epi64x(1)), 63));
    __m256d s = _mm256_blendv_pd(sr, cr, odd);
    __m256d c = _mm256_blendv_pd(cr, sr, odd);
    __m256i sin_sign = _mm256_slli_epi64(_mm256_and_si256(qi, _mm256_set1_epi64x(2)), 62);
    __m256i cos_sign = _mm256_slli_epi64(
        _mm256_and_si256(_mm256_add_epi64(qi, _mm256_set1_epi64x(1)), _mm256_set1_epi64x(2)), 62);
    *sin_out = _mm256_castsi256_pd(_mm256_xor_si256(_mm256_castpd_si256(s), sin_sign));
    *cos_out = _mm256_castsi256_pd(_mm256_xor_si256(_mm256_castpd_si256(c), cos_sign));
  }
};

}  // namespace
}  // namespace kiln::kernels
