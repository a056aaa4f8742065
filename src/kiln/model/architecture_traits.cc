#include "kiln/model/architecture_traits.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

#include "kiln/base/error.h"

namespace kiln::model {
namespace {

// Mixture-of-experts families users meet as GGUF files, and what each needs beyond the expert
// FFN kiln has (the Qwen3-MoE / Mixtral one: softmax router, top-k, SwiGLU experts), so that
// their refusal says why rather than only that the name is unknown.
struct RefusedMoe {
  std::string_view arch;
  std::string_view needs;
};
constexpr RefusedMoe kRefusedMoe[] = {
    {"qwen2moe", "a shared expert with its own sigmoid gate beside the routed experts"},
    {"deepseek", "shared experts and leading dense layers"},
    {"olmoe", "Q/K RMSNorm over the whole projection rather than per head"},
    {"granitemoe", "Granite's embedding, residual, attention and logit multipliers"},
    {"phimoe", "LayerNorm with biases and its sparsemixer routing"},
    {"dbrx", "LayerNorm and clamped Q/K/V"},
    {"llama4", "interleaved dense and expert layers with a shared expert, and chunked attention"},
};

}  // namespace

const ArchitectureTraits& architecture_traits(std::string_view arch) {
  const ArchitectureTraits* t = find_architecture(arch);
  if (t != nullptr) return *t;
  for (const RefusedMoe& r : kRefusedMoe) {
    KILN_CHECK(r.arch != arch,
               "unsupported architecture '{}': a mixture-of-experts family that needs {}, which "
               "kiln does not implement (kiln supports {})",
               arch, r.needs, supported_architectures());
  }
  fail("unsupported architecture '{}' (kiln supports {})", arch, supported_architectures());
}

std::string supported_architectures() {
  std::vector<std::string_view> names;
  for (const ArchitectureTraits& t : kArchitectures) names.push_back(t.arch);
  return fmt::format("{}", fmt::join(names, ", "));
}

std::string supported_hf_classes() {
  std::vector<std::string_view> names;
  for (const HfArchitecture& h : kHfArchitectures) names.push_back(h.hf_class);
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace kiln::model
