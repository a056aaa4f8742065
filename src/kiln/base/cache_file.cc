#include "kiln/base/cache_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <cerrno>
#include <filesystem>

#include "kiln/base/log.h"

namespace kiln::cache_file {

uint64_t checksum(const void* data, size_t bytes) { return XXH3_64bits(data, bytes); }

std::string temporary_path(const std::string& path) {
  return path + ".tmp." + std::to_string(::getpid());
}

bool rename_into_place(const std::string& temporary, const std::string& path) {
  return ::rename(temporary.c_str(), path.c_str()) == 0;
}

bool write_atomically(const std::string& path, std::initializer_list<std::string_view> pieces) {
  const std::string tmp = temporary_path(path);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  bool ok = true;
  for (std::string_view piece : pieces) {
    const char* c = piece.data();
    size_t n = piece.size();
    while (ok && n > 0) {
      const ssize_t w = ::write(fd, c, n);
      ok = w > 0;
      if (ok) c += w, n -= static_cast<size_t>(w);
    }
  }
  ok = ok && ::fsync(fd) == 0;
  const int saved = errno;
  ::close(fd);
  if (ok && rename_into_place(tmp, path)) return true;
  ::unlink(tmp.c_str());
  errno = saved;
  return false;
}

void remove_orphaned_temporaries(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path entry(path);
  const std::string prefix = entry.filename().string() + ".tmp.";
  for (const auto& e : fs::directory_iterator(entry.parent_path(), ec)) {
    const std::string name = e.path().filename().string();
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string pid = name.substr(prefix.size());
    if (pid.empty() || pid.size() > 9 || pid.find_first_not_of("0123456789") != std::string::npos)
      continue;
    if (::kill(static_cast<pid_t>(std::stol(pid)), 0) != 0 && errno == ESRCH) {
      fs::remove(e.path(), ec);
    }
  }
}

void discard(const std::string& path, std::string_view what, std::string_view why,
             std::string_view then) {
  KILN_LOG_WARN("{} {} is {}; {}", what, path, why, then);
  std::error_code ec;
  std::filesystem::remove(path, ec);
}

void touch(const std::string& path) { ::utimensat(AT_FDCWD, path.c_str(), nullptr, 0); }

}  // namespace kiln::cache_file
