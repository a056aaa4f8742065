// Internal: one ISA's implementations of the elementwise kernels, each over a plain range
// (the public functions in elementwise.cc split the range across threads and pick the ISA).
#pragma once
#include <cstdint>

namespace kiln::kernels::detail {

struct ElementwiseFns {
  void (*add)(const float* a, const float* b, float* out, int64_t n);
  void (*mul)(const float* a, const float* b, float* out, int64_t n);
  void (*scale)(const float* x, float factor, float* out, int64_t n);
  void (*gelu_tanh)(const float* x, float* out, int64_t n);
  void (*silu)(const float* x, float* out, int64_t n);
  void (*softcap)(const float* x, float cap, float* out, int64_t n);
  void (*gelu_mul)(const float* gate, const float* up, float* out, int64_t n);
  void (*silu_mul)(const float* gate, const float* up, float* out, int64_t n);
  void (*gelu_erf)(const float* x, float* out, int64_t n);
};

extern const ElementwiseFns kElementwiseScalar;
extern const ElementwiseFns kElementwiseAvx2;
extern const ElementwiseFns kElementwiseAvx512;

}  // namespace kiln::kernels::detail
