#include "kiln/kernels/packed_experts.h"

#include "kiln/base/error.h"

namespace kiln::kernels {

size_t PackedExperts::bytes() const {
  size_t total = 0;
  for (const PackedWeight& w : experts) total += w.bytes();
  return total;
}

PackedExperts pack_experts(const std::vector<Tensor>& parts, const PackedAllocator& alloc,
                           const ParallelFor& parallel) {
  KILN_CHECK(!parts.empty(), "pack_experts: no weights");
  const int64_t n_experts = parts[0].shape().rank() == 3 ? parts[0].shape()[0] : -1;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Tensor& t = parts[i];
    KILN_CHECK(t.shape().rank() == 3, "expert weight {} must be [E, N, K], got {}", i,
               t.shape().str());
    KILN_CHECK(t.shape()[0] == n_experts && n_experts > 0,
               "pack_experts: weight {} has {} experts, weight 0 has {}", i, t.shape()[0],
               n_experts);
    KILN_CHECK(t.contiguous() && t.data() != nullptr, "expert weight {} must be contiguous", i);
  }
  PackedExperts out;
  out.experts.reserve(static_cast<size_t>(n_experts));
  for (int64_t e = 0; e < n_experts; ++e) {
    std::vector<Tensor> slices;
    for (const Tensor& t : parts) {
      const Shape& s = t.shape();
      slices.push_back(t.slice_rows(e, e + 1).reshaped(Shape{s[1], s[2]}));
    }
    out.experts.push_back(PackedWeight::pack_concat(slices, alloc, parallel));
  }
  return out;
}

}  // namespace kiln::kernels
