#include "kiln/base/mmap_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

#include "kiln/base/error.h"

namespace kiln {
namespace {

// Every live mapping, by start address: release_pages must never be handed anonymous memory
// (MADV_DONTNEED would zero it), so it only acts inside a range registered here.
struct Mappings {
  std::mutex mutex;
  std::map<uintptr_t, size_t> sizes;
};

Mappings& mappings() {
  static Mappings m;
  return m;
}

}  // namespace

std::shared_ptr<MmapFile> MmapFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  KILN_CHECK(fd >= 0, "cannot open '{}': {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("'{}' is not a regular file", path);
  }
  auto file = std::shared_ptr<MmapFile>(new MmapFile());
  file->path_ = path;
  file->size_ = static_cast<size_t>(st.st_size);
  if (file->size_ > 0) {
    void* p = ::mmap(nullptr, file->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    int err = errno;
    ::close(fd);
    KILN_CHECK(p != MAP_FAILED, "cannot map '{}': {}", path, std::strerror(err));
    file->data_ = static_cast<const uint8_t*>(p);
    std::lock_guard<std::mutex> lock(mappings().mutex);
    mappings().sizes[reinterpret_cast<uintptr_t>(p)] = file->size_;
  } else {
    ::close(fd);
  }
  return file;
}

MmapFile::~MmapFile() {
  if (data_ == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(mappings().mutex);
    mappings().sizes.erase(reinterpret_cast<uintptr_t>(data_));
  }
  ::munmap(const_cast<uint8_t*>(data_), size_);
}

size_t MmapFile::release_pages(const void* p, size_t n) {
  static const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const auto begin = reinterpret_cast<uintptr_t>(p);
  const uintptr_t first = (begin + page - 1) / page * page;  // whole pages only
  const uintptr_t last = (begin + n) / page * page;
  if (n == 0 || last <= first) return 0;
  std::lock_guard<std::mutex> lock(mappings().mutex);
  auto it = mappings().sizes.upper_bound(begin);
  if (it == mappings().sizes.begin()) return 0;
  --it;
  if (begin + n > it->first + it->second) return 0;  // not (wholly) inside this mapping
  // Under the lock, so the mapping cannot be unmapped (and the range reused) meanwhile.
  if (::madvise(reinterpret_cast<void*>(first), last - first, MADV_DONTNEED) != 0) return 0;
  return last - first;
}

}  // namespace kiln
