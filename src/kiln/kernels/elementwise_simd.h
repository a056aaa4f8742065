// Internal: the elementwise kernels written once over an ISA's vector type S (see
// simd_avx512.h). Include only from *_avx512.cc / *_avx2.cc after the S header. Tails use
// masked loads and the same vector math, so an element's result never depends on where it
// sits in the array.
#pragma once
#include <cstdint>

#include "kiln/kernels/elementwise_isa.h"
#include "kiln/kernels/simd_math.h"

namespace kiln::kernels {

template <class S>
struct ElementwiseSimd {
  using F = typename S::F;
  static constexpr int W = S::W;

  template <class Op>
  static void map1(const float* x, float* out, int64_t n, Op op) {
    int64_t i = 0;
    for (; i + W <= n; i += W) S::store(out + i, op(S::load(x + i)));
    if (i < n) {
      int m = static_cast<int>(n - i);
      S::store_n(out + i, op(S::load_n(x + i, m)), m);
    }
  }

  template <class Op>
  static void map2(const float* a, const float* b, float* out, int64_t n, Op op) {
    int64_t i = 0;
    for (; i + W <= n; i += W) S::store(out + i, op(S::load(a + i), S::load(b + i)));
    if (i < n) {
      int m = static_cast<int>(n - i);
      S::store_n(out + i, op(S::load_n(a + i, m), S::load_n(b + i, m)), m);
    }
  }

  static void add(const float* a, const float* b, float* out, int64_t n) {
    map2(a, b, out, n, [](F x, F y) { return S::add(x, y); });
  }
  static void mul(const float* a, const float* b, float* out, int64_t n) {
    map2(a, b, out, n, [](F x, F y) { return S::mul(x, y); });
  }
  static void scale(const float* x, float factor, float* out, int64_t n) {
    F f = S::set1(factor);
    map1(x, out, n, [f](F v) { return S::mul(v, f); });
  }
  static void gelu_tanh(const float* x, float* out, int64_t n) {
    map1(x, out, n, [](F v) { return gelu_v<S>(v); });
  }
  static void silu(const float* x, float* out, int64_t n) {
    map1(x, out, n, [](F v) { return silu_v<S>(v); });
  }
  static void softcap(const float* x, float cap, float* out, int64_t n) {
    F c = S::set1(cap);
    F inv = S::set1(1.0f / cap);
    map1(x, out, n, [c, inv](F v) { return S::mul(c, tanh_v<S>(S::mul(v, inv))); });
  }
  // The activation is rounded to float before the multiply, exactly as the unfused pair does.
  static void gelu_mul(const float* gate, const float* up, float* out, int64_t n) {
    map2(gate, up, out, n, [](F g, F u) { return S::mul(gelu_v<S>(g), u); });
  }
  static void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
    map2(gate, up, out, n, [](F g, F u) { return S::mul(silu_v<S>(g), u); });
  }

  static void gelu_erf(const float* x, float* out, int64_t n) {
    map1(x, out, n, [](F v) { return gelu_erf_v<S>(v); });
  }

  static constexpr detail::ElementwiseFns table() {
    return {add, mul, scale, gelu_tanh, silu, softcap, gelu_mul, silu_mul, gelu_erf};
  }
};

}  // namespace kiln::kernels
