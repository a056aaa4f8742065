// The experts of a mixture-of-experts layer as matmul weights. GGUF stores an expert weight as
// one 3-D tensor [E, N, K] whose expert slices [N, K] are contiguous: each slice is an ordinary
// 2-D weight, packed on its own (PackedWeight) so that the MoE kernel runs the existing matmul
// over just the rows routed to that expert.
#pragma once
#include <vector>

#include "kiln/base/tensor.h"
#include "kiln/kernels/packed_weight.h"

namespace kiln::kernels {

// One PackedWeight per expert, in expert order.
struct PackedExperts {
  std::vector<PackedWeight> experts;
  size_t bytes() const;
};

// Expert e's slices of every part, rows stacked in part order: parts {gate [E,F,D], up [E,F,D]}
// give experts of [2F, D] (gate rows, then up rows: one matmul, two outputs); {down [E,D,F]}
// gives [D, F]. Parts must agree on E and K; their dtypes may differ. Experts are packed in
// order through `alloc` (so a weight store lays them out as one stream).
PackedExperts pack_experts(const std::vector<Tensor>& parts, const PackedAllocator& alloc = nullptr,
                           const ParallelFor& parallel = nullptr);

}  // namespace kiln::kernels
