// How lowering reaches the model's weights without the graph layer knowing about files: the
// model layer implements this over its GGUF file and repacked copies.
#pragma once
#include <vector>

#include "kiln/base/communicator.h"
#include "kiln/base/tensor.h"
#include "kiln/graph/ir.h"
#include "kiln/kernels/packed_experts.h"
#include "kiln/kernels/packed_weight.h"

namespace kiln::graph {

class WeightProvider {
 public:
  virtual ~WeightProvider() = default;
  // The tensor as stored (norm weights, biases, embedding tables). Throws Error if unknown.
  virtual const Tensor& raw(const Node& param) = 0;
  // The weight repacked for matmul; for a derived {concat=[...]} param, the concatenation.
  virtual const kernels::PackedWeight& packed(const Node& param) = 0;
  // The experts of 3-D mixture-of-experts weights [E, N, K]: per expert, its slices of every
  // param in `parts`, rows stacked ({gate_exps, up_exps}: [2F, D]; {down_exps}: [D, F]).
  virtual const kernels::PackedExperts& packed_experts(const std::vector<const Node*>& parts) = 0;
  // Under tensor parallelism these weights are one rank's shard, and this is the group that
  // holds the others (what the graph's collectives run on); null for a whole model.
  virtual Communicator* communicator() { return nullptr; }
};

}  // namespace kiln::graph
