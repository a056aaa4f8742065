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

template <class S>
typename S::F silu_v(typename S::F x) {
  using F = typename S::F;
  F e = S::exp(S::sub(S::zero(), x));
  return S::div(x, S::add(S::set1(1.0f), e));
}

}  // namespace kiln::kernels
