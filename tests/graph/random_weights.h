// An in-memory WeightProvider for graph tests: every param a graph declares gets a random
// tensor of its declared dtype and shape (float types: normal values; quantized types: random
// codes with finite f16 scales), so passes and plans can be run numerically without a model
// file. A tensor depends only on the seed and the param's name, so an unfused graph and its
// fused form (or two providers with one seed) see the same weights. Derived {concat=[...]}
// params (fuse_matmul_merge) are packed from their parts, as the model's WeightStore does, and
// so are the per-expert weights of moe_ffn.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kiln/base/tensor.h"
#include "kiln/graph/weight_provider.h"

namespace kiln::graph::testing {

// A tensor of dtype `t` and shape `s` (for quantized types, s.cols() a whole number of blocks)
// filled deterministically from `seed`.
Tensor random_tensor(DType t, const Shape& s, uint64_t seed);

class RandomWeights : public WeightProvider {
 public:
  explicit RandomWeights(uint64_t seed = 1) : seed_(seed) {}

  // Creates the tensor of every plain param of `g` now (so that the parts of a concatenation
  // a pass makes later are known).
  void declare(const Graph& g);
  // The tensor of param `name` (created from `type` on first use).
  const Tensor& tensor(const std::string& name, const ValueType& type);

  const Tensor& raw(const Node& param) override;
  const kernels::PackedWeight& packed(const Node& param) override;
  const kernels::PackedExperts& packed_experts(const std::vector<const Node*>& parts) override;

  // How many times packed() was asked for a concatenation (tests check merged weights are used).
  int concat_packs() const { return concat_packs_; }

 private:
  const Tensor& find(const std::string& name) const;

  uint64_t seed_;
  std::map<std::string, Tensor> tensors_;
  std::map<std::string, std::unique_ptr<kernels::PackedWeight>> packed_;
  std::map<std::string, std::unique_ptr<kernels::PackedExperts>> experts_;
  int concat_packs_ = 0;
};

}  // namespace kiln::graph::testing
