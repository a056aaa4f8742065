#include "kiln/graph/compile_cache.h"

#include <fcntl.h>
#include <unistd.h>
#include <xxhash.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kiln/base/log.h"
#include "kiln/graph/cache_eviction.h"

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
  std::snprintf(name, sizeof name, "%016llx.kgc", static_cast<unsigned long long>(key));
  return dir_ + "/" + name;
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
    KILN_LOG_WARN("compile cache entry {} is {}; rebuilding it", path, why);
    std::error_code ec;
    std::filesystem::remove(path, ec);
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
  if (XXH3_64bits(payload.data(), payload.size()) != h.checksum)
    return reject("corrupted (checksum mismatch)");
  touch_cache_entry(path);
  return payload;
}

void CompileCache::store(uint64_t key, std::string_view payload) const {
  if (!enabled()) return;
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  const std::string path = path_for(key);
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  Header h{key, payload.size(), XXH3_64bits(payload.data(), payload.size())};
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    KILN_LOG_WARN("cannot write compile cache entry {}: {}", tmp, std::strerror(errno));
    return;
  }
  auto write_all = [&](const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    while (n > 0) {
      ssize_t w = ::write(fd, c, n);
      if (w <= 0) return false;
      c += w;
      n -= static_cast<size_t>(w);
    }
    return true;
  };
  bool ok = write_all(kMagic.data(), kMagic.size()) && write_all(&h, sizeof h) &&
            write_all(payload.data(), payload.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    KILN_LOG_WARN("cannot write compile cache entry {}: {}", path, std::strerror(errno));
    ::unlink(tmp.c_str());
  }
}

}  // namespace kiln::graph
