#include "graph/random_weights.h"

#include <cstring>
#include <random>
#include <vector>

#include "kiln/base/error.h"
#include "kiln/base/half.h"
#include "kiln/kernels/quant_format.h"

namespace kiln::graph::testing {
namespace {

// FNV-1a: a name hash that is the same in every run and on every standard library.
uint64_t mix(uint64_t seed, const std::string& name) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (unsigned char ch : name) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace

Tensor random_tensor(DType t, const Shape& s, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Tensor out = Tensor::empty(t, s);
  const int64_t n = s.numel();
  auto* bytes = static_cast<uint8_t*>(out.data());
  switch (t) {
    case DType::F32:
      for (int64_t i = 0; i < n; ++i) out.data_as<float>()[i] = normal(rng);
      return out;
    case DType::F16:
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) {
        const float v = normal(rng);
        const uint16_t h = t == DType::F16 ? f32_to_f16(v) : f32_to_bf16(v);
        std::memcpy(bytes + 2 * i, &h, 2);
      }
      return out;
    case DType::I32:
      for (int64_t i = 0; i < n; ++i) out.data_as<int32_t>()[i] = static_cast<int32_t>(rng() % 7);
      return out;
    default:
      break;
  }
  const kernels::QuantFormat* f = kernels::find_quant_format(t);
  KILN_CHECK(f != nullptr, "random_tensor: unsupported dtype {}", dtype_name(t));
  const size_t total = dtype_bytes(t, n);
  for (size_t i = 0; i < total; ++i) bytes[i] = static_cast<uint8_t>(rng());
  // Random bits in the f16 scales could be Inf or NaN (codes and the K-quants' 6/8-bit
  // sub-scales are valid whatever their bits). Scales of moderate size and either sign keep
  // products far from overflow; K-quants multiply d by a sub-scale of up to 63 (127 for Q6_K),
  // so their d is smaller.
  std::uniform_real_distribution<float> magnitude(0.002f, 0.05f);
  const float shrink = f->split_scales ? 0.1f : 1.0f;
  const size_t block_bytes = static_cast<size_t>(f->block_bytes());
  for (size_t block = 0; block < total / block_bytes; ++block) {
    for (int off : {f->d_offset, f->dmin_offset}) {
      if (off < 0) continue;
      float d = magnitude(rng) * ((rng() & 1) ? 1.0f : -1.0f) * shrink;
      const uint16_t h = f32_to_f16(d);
      std::memcpy(bytes + block * block_bytes + off, &h, 2);
    }
  }
  return out;
}

void RandomWeights::declare(const Graph& g) {
  for (const Node& n : g.nodes()) {
    if (n.op == Op::Param && !n.attrs.has("concat") && !n.attrs.has("derive"))
      tensor(n.attrs.get_str("name"), n.outputs[0]);
  }
}

const Tensor& RandomWeights::tensor(const std::string& name, const ValueType& type) {
  auto it = tensors_.find(name);
  if (it == tensors_.end())
    it = tensors_.emplace(name, random_tensor(type.dtype, type.shape, mix(seed_, name))).first;
  KILN_CHECK(it->second.dtype() == type.dtype && it->second.shape() == type.shape,
             "param '{}' was made as {}{}, now declared {}{}", name, dtype_name(it->second.dtype()),
             it->second.shape().str(), dtype_name(type.dtype), type.shape.str());
  return it->second;
}

const Tensor& RandomWeights::find(const std::string& name) const {
  auto it = tensors_.find(name);
  KILN_CHECK(it != tensors_.end(),
             "RandomWeights: no tensor '{}' (declare the unfused graph first)", name);
  return it->second;
}

const Tensor& RandomWeights::raw(const Node& param) {
  KILN_CHECK(param.op == Op::Param, "RandomWeights::raw: not a param");
  KILN_CHECK(!param.attrs.has("concat") && !param.attrs.has("derive"),
             "RandomWeights: derived param '{}' has no stored form", param.attrs.get_str("name"));
  return tensor(param.attrs.get_str("name"), param.outputs[0]);
}

const kernels::PackedWeight& RandomWeights::packed(const Node& param) {
  const std::string& name = param.attrs.get_str("name");
  auto it = packed_.find(name);
  if (it != packed_.end()) return *it->second;
  std::unique_ptr<kernels::PackedWeight> w;
  if (param.attrs.has("concat")) {
    std::vector<Tensor> parts;
    for (const std::string& part : param.attrs.get_strs("concat")) parts.push_back(find(part));
    w = std::make_unique<kernels::PackedWeight>(kernels::PackedWeight::pack_concat(parts));
    ++concat_packs_;
  } else {
    w = std::make_unique<kernels::PackedWeight>(kernels::PackedWeight::pack(raw(param)));
  }
  return *packed_.emplace(name, std::move(w)).first->second;
}

const kernels::PackedExperts& RandomWeights::packed_experts(const std::vector<const Node*>& parts) {
  std::string key;
  for (const Node* p : parts) key += p->attrs.get_str("name") + "+";
  auto it = experts_.find(key);
  if (it != experts_.end()) return *it->second;
  std::vector<Tensor> tensors;
  for (const Node* p : parts) tensors.push_back(raw(*p));
  auto w = std::make_unique<kernels::PackedExperts>(kernels::pack_experts(tensors));
  return *experts_.emplace(key, std::move(w)).first->second;
}

}  // namespace kiln::graph::testing
