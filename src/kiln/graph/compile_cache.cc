#include "kiln/graph/compile_cache.h"

#include <xxhash.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kiln/base/cache_file.h"
#include "kiln/base/log.h"

namespace kiln::graph {
namespace {

// Bump when the payload format changes: older entries then read as foreign and are rebuilt.
constexpr std::string_view kMagic = "KILN-COMPILE-CACHE v1\n";

struct Header {
  uint64_t key;
  uint64_t payload_bytes;
  uint64_t checksum;
};

}  // namespace

uint64_t cache_key(std::string_view description) {
  return XXH3_64bits(description.data(), description.size());
}

std::string executable_identity() {
  std::error_code ec;
  const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "unknown";
  const auto size = std::filesystem::file_size(exe, ec);
  const auto mtime = std::filesystem::last_write_time(exe, ec).time_since_epoch().count();
  return std::to_string(size) + ":" + std::to_string(mtime);
}

CompileCache::CompileCache(std::string dir) : dir_(std::move(dir)) {}

std::string CompileCache::resolve_dir(const std::string& flag_value) {
  if (!flag_value.empty()) return flag_value;
  if (const char* env = std::getenv("KILN_CACHE_DIR"); env != nullptr && *env != '\0') return env;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0')
    return std::string(xdg) + "/kiln";
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0')
    return std::string(home) + "/.cache/kiln";
  return {};
}

std::string CompileCache::path_for(uint64_t key) const {
  char name[32];
  std::snprintf(name, sizeof name, "%016llx", static_cast<unsigned long long>(key));
  return dir_ + "/" + name + std::string(cache_file::kCompiledPlanExtension);
}

std::optional<std::string> CompileCache::load(uint64_t key) const {
  if (!enabled()) return std::nullopt;
  const std::string path = path_for(key);
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string data = buf.str();
  auto reject = [&](const char* why) -> std::optional<std::string> {
    cache_file::discard(path, "compile cache entry", why, "rebuilding it");
    return std::nullopt;
  };
  if (data.size() < kMagic.size() + sizeof(Header) || data.compare(0, kMagic.size(), kMagic) != 0)
    return reject("not a kiln cache entry of this version");
  Header h;
  std::memcpy(&h, data.data() + kMagic.size(), sizeof h);
  const size_t body = kMagic.size() + sizeof h;
  if (h.key != key) return reject("for another key");
  if (data.size() - body != h.payload_bytes) return reject("truncated");
  std::string payload = data.substr(body);
  if (cache_file::checksum(payload.data(), payload.size()) != h.checksum)
    return reject("corrupted (checksum mismatch)");
  cache_file::touch(path);
  return payload;
}

void CompileCache::store(uint64_t key, std::string_view payload) const {
  if (!enabled()) return;
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  const std::string path = path_for(key);
  const Header h{key, payload.size(), cache_file::checksum(payload.data(), payload.size())};
  const std::string_view header(reinterpret_cast<const char*>(&h), sizeof h);
  if (!cache_file::write_atomically(path, {kMagic, header, payload})) {
    KILN_LOG_WARN("cannot write compile cache entry {}: {}", path, std::strerror(errno));
  }
}

}  // namespace kiln::graph
