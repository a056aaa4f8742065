// Activation functions built from one ISA's vector operations (S = Avx512 or Avx2 from
// simd_avx512.h / simd_avx2.h). Include only from ISA files, after the S header. The templates
// are instantiated with types from an anonymous namespace, so every instance has internal
// linkage and cannot clash with another ISA's.
#pragma once

namespace kiln::kernels {

// tanh: an odd polynomial for |x| < 0.625 (Cephes tanhf coefficients; keeps relative accuracy
// near 0, where 1 - 2/(e^2x + 1) would cancel), else 1 - 2/(e^(2|x|) + 1) with x's sign.
template <class S>
typename S::F tanh_v(typename S::F x) {
  using F = typename S::F;
  F z = S::mul(x, x);
  F p = S::set1(-5.70498872745e-3f);
  p = S::fma(p, z, S::set1(2.06390887954e-2f));
  p = S::fma(p, z, S::set1(-5.37397155531e-2f));
  p = S::fma(p, z, S::set1(1.33314422036e-1f));
  p = S::fma(p, z, S::set1(-3.33332819422e-1f));
  F small = S::fma(S::mul(p, z), x, x);
  F ax = S::abs(x);
  F e = S::exp(S::add(ax, ax));
  F big = S::sub(S::set1(1.0f), S::div(S::set1(2.0f), S::add(e, S::set1(1.0f))));
  big = S::copysign(big, x);
  return S::select_lt(ax, S::set1(0.625f), small, big);
}

// The constants of the tanh-approximated GELU: sqrt(2/pi) and sqrt(2/pi) * 0.044715.
constexpr float kGeluC0 = 0.7978845608028654f;
constexpr float kGeluC1 = 0.035677408136300125f;

// gelu_tanh(x) = 0.5x(1 + tanh(y)), y = sqrt(2/pi)(x + 0.044715x^3), evaluated as the equal
// x / (1 + e^(-2y)): no cancellation in 1 + tanh(y) for negative x.
template <class S>
typename S::F gelu_v(typename S::F x) {
  using F = typename S::F;
  F y = S::mul(x, S::fma(S::set1(kGeluC1), S::mul(x, x), S::set1(kGeluC0)));
  F e = S::exp(S::mul(y, S::set1(-2.0f)));
  return S::div(x, S::add(S::set1(1.0f), e));
}

// gelu_erf(x) = x * Phi(x) = 0.5x(1 + erf(x / sqrt(2))), BERT's exact GELU. erf by Abramowitz
// and Stegun 7.1.26 (|error| < 1.5e-7 absolute): erf(z) = 1 - t(a1 + t(a2 + ...)) e^(-z^2),
// t = 1 / (1 + p z) for z >= 0, odd in z.
constexpr float kSqrtHalf = 0.70710678118654752f;
template <class S>
typename S::F gelu_erf_v(typename S::F x) {
  using F = typename S::F;
  F z = S::abs(S::mul(x, S::set1(kSqrtHalf)));
  F t = S::div(S::set1(1.0f), S::fma(S::set1(0.3275911f), z, S::set1(1.0f)));
  F p = S::set1(1.061405429f);
  p = S::fma(p, t, S::set1(-1.453152027f));
  p = S::fma(p, t, S::set1(1.421413741f));
  p = S::fma(p, t, S::set1(-0.284496736f));
  p = S::fma(p, t, S::set1(0.254829592f));
  F erf_abs = S::fnma(S::mul(p, t), S::exp(S::sub(S::zero(), S::mul(z, z))), S::set1(1.0f));
  F erf = S::copysign(erf_abs, x);
  return S::mul(S::mul(S::set1(0.5f), x), S::add(S::set1(1.0f), erf));
}

template <class S>
typename S::F silu_v(typename S::F x) {
  using F = typename S::F;
  F e = S::exp(S::sub(S::zero(), x));
  return S::div(x, S::add(S::set1(1.0f), e));
}

}  // namespace kiln::kernels
