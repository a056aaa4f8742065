#include "kiln/model/architecture_traits.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

#include "kiln/base/error.h"

namespace kiln::model {

const ArchitectureTraits& architecture_traits(std::string_view arch) {
  const ArchitectureTraits* t = find_architecture(arch);
  KILN_CHECK(t != nullptr, "unsupported architecture '{}' (kiln supports {})", arch,
             supported_architectures());
  return *t;
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
