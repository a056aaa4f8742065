// describe(): the short human summary of a GGUF file that `kiln` prints.
#include <fmt/format.h>

#include <map>

#include "kiln/model/gguf.h"

namespace kiln::model {
namespace {

std::string human_bytes(uint64_t n) {
  if (n < 1024) return fmt::format("{} B", n);
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = -1;
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  return fmt::format("{:.1f} {}", v, units[u]);
}

// A string-valued key for display, or `fallback` when it is absent or not a string.
std::string string_or(const GgufFile& f, std::string_view key, std::string_view fallback) {
  const GgufValue* v = f.find(key);
  if (v != nullptr && v->string() != nullptr) return printable(*v->string());
  return std::string(fallback);
}

}  // namespace

std::string describe(const GgufFile& file) {
  struct TypeStats {
    size_t count = 0;
    uint64_t bytes = 0;
    bool supported = true;
  };
  std::map<std::string, TypeStats> by_type;
  uint64_t total_bytes = 0;
  uint64_t total_params = 0;  // unsigned: a corrupt unknown-type shape may be huge
  for (const GgufTensorInfo& t : file.tensor_infos()) {
    TypeStats& s = by_type[t.type_name()];
    s.count += 1;
    s.bytes += t.nbytes;
    s.supported = t.dtype.has_value();
    total_bytes += t.nbytes;
    total_params += static_cast<uint64_t>(t.shape.numel());
  }

  std::string out = fmt::format("{}: GGUF v{}, architecture {}, name {}\n", file.path(),
                                file.version(), string_or(file, "general.architecture", "(none)"),
                                string_or(file, "general.name", "(none)"));
  out += fmt::format("  {} tensors, {} parameters, {} of tensor data (file {}), {} metadata keys\n",
                     file.tensor_infos().size(), total_params, human_bytes(total_bytes),
                     human_bytes(file.file_size()), file.metadata().size());
  std::string types;
  for (const auto& [name, s] : by_type) {
    types += fmt::format("{}{} x{} ({}{})", types.empty() ? "" : ", ", name, s.count,
                         human_bytes(s.bytes), s.supported ? "" : ", unsupported");
  }
  out += fmt::format("  tensor types: {}\n", types.empty() ? "(none)" : types);
  return out;
}

}  // namespace kiln::model
