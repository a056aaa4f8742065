#include "kiln/model/packed_weights_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string_view>

#include "kiln/base/log.h"
#include "kiln/base/mmap_file.h"
#include "kiln/graph/cache_eviction.h"

namespace kiln::model {
namespace {

// Bump when the layout changes: older files then read as foreign and are rebuilt.
constexpr char kMagic[32] = "KILN-PACKED-WEIGHTS v1\n";

struct Header {
  uint64_t key;
  uint64_t toc_bytes;    // the table of contents, right after this header
  uint64_t data_offset;  // page-aligned file offset of the packed bytes
  uint64_t data_bytes;   // to the end of the file
  uint64_t checksum;     // xxHash3 of [end of this header, end of file)
};

constexpr size_t kBody = sizeof kMagic + sizeof(Header);
constexpr size_t kPage = 4096;

size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

void put_u32(std::string& out, uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); }
void put_u64(std::string& out, uint64_t v) { out.append(reinterpret_cast<const char*>(&v), 8); }

// Reads the table of contents with bounds checks; false when it does not parse.
class TocReader {
 public:
  explicit TocReader(std::string_view toc) : in_(toc) {}
  bool u32(uint32_t& v) { return take(&v, 4); }
  bool u64(uint64_t& v) { return take(&v, 8); }
  bool bytes(size_t n, std::string_view& v) {
    if (in_.size() - pos_ < n) return false;
    v = in_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  bool done() const { return pos_ == in_.size(); }

 private:
  bool take(void* v, size_t n) {
    if (in_.size() - pos_ < n) return false;
    std::memcpy(v, in_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  std::string_view in_;
  size_t pos_ = 0;
};

// Removes `<name>.tmp.<pid>` files of processes that no longer run (killed mid-write): each is
// as large as the packed weights.
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

}  // namespace

bool write_packed_weights_file(const std::string& path, uint64_t key,
                               const std::vector<NamedPackedWeight>& weights) {
  std::string toc;
  put_u32(toc, static_cast<uint32_t>(weights.size()));
  std::vector<size_t> offsets;
  size_t data_bytes = 0;
  for (const auto& [name, w] : weights) {
    const std::string header = w->serialize_header();
    put_u32(toc, static_cast<uint32_t>(name.size()));
    toc += name;
    put_u32(toc, static_cast<uint32_t>(header.size()));
    toc += header;
    data_bytes = align_up(data_bytes, 64);
    put_u64(toc, data_bytes);
    offsets.push_back(data_bytes);
    data_bytes += w->bytes();
  }
  const size_t data_offset = align_up(kBody + toc.size(), kPage);
  const std::string zeros(std::max<size_t>(kPage, 64), '\0');

  // The checksum first, over exactly the bytes written below, so the header goes out once.
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  XXH3_64bits_update(state, toc.data(), toc.size());
  XXH3_64bits_update(state, zeros.data(), data_offset - kBody - toc.size());
  size_t at = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    XXH3_64bits_update(state, zeros.data(), offsets[i] - at);
    XXH3_64bits_update(state, weights[i].second->data(), weights[i].second->bytes());
    at = offsets[i] + weights[i].second->bytes();
  }
  const Header h{key, toc.size(), data_offset, data_bytes, XXH3_64bits_digest(state)};
  XXH3_freeState(state);

  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  remove_orphaned_temporaries(path);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    KILN_LOG_WARN("cannot write packed weights cache {}: {}; running without it", tmp,
                  std::strerror(errno));
    return false;
  }
  auto write_all = [&](const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    while (n > 0) {
      const ssize_t w = ::write(fd, c, n);
      if (w <= 0) return false;
      c += w;
      n -= static_cast<size_t>(w);
    }
    return true;
  };
  bool ok = write_all(kMagic, sizeof kMagic) && write_all(&h, sizeof h) &&
            write_all(toc.data(), toc.size()) &&
            write_all(zeros.data(), data_offset - kBody - toc.size());
  at = 0;
  for (size_t i = 0; ok && i < weights.size(); ++i) {
    ok = write_all(zeros.data(), offsets[i] - at) &&
         write_all(weights[i].second->data(), weights[i].second->bytes());
    at = offsets[i] + weights[i].second->bytes();
  }
  // No fsync (it cost seconds per GB on the cold start): a process that dies mid-write leaves
  // only its temporary file, and a file torn by a power loss after the rename fails the size
  // or checksum check on load and is rebuilt, never trusted.
  const int err = errno;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    KILN_LOG_WARN("cannot write packed weights cache {}: {}; running without it", path,
                  std::strerror(ok ? errno : err));
    ::unlink(tmp.c_str());
    return false;
  }
  return true;
}

std::optional<std::vector<std::pair<std::string, kernels::PackedWeight>>> load_packed_weights_file(
    const std::string& path, uint64_t key) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  std::shared_ptr<MmapFile> file;
  try {
    file = MmapFile::open(path);
  } catch (const std::exception& e) {
    KILN_LOG_WARN("cannot read packed weights cache: {}; repacking", e.what());
    return std::nullopt;
  }
  auto reject = [&](const char* why) {
    KILN_LOG_WARN("packed weights cache {} is {}; repacking and rewriting it", path, why);
    std::filesystem::remove(path, ec);
    return std::nullopt;
  };
  const size_t size = file->size();
  const auto* base = file->data();
  if (size < kBody || std::memcmp(base, kMagic, sizeof kMagic) != 0)
    return reject("not a packed weights file of this version");
  Header h{};
  std::memcpy(&h, base + sizeof kMagic, sizeof h);
  if (h.key != key) return reject("for another key");
  if (h.data_offset % kPage != 0 || h.data_offset < kBody || h.toc_bytes > h.data_offset - kBody ||
      h.data_offset > size || size - h.data_offset != h.data_bytes)
    return reject("truncated");
  // Read ahead: verifying reads every page, and the weights are used from these pages.
  ::madvise(const_cast<uint8_t*>(base), size, MADV_WILLNEED);
  if (XXH3_64bits(base + kBody, size - kBody) != h.checksum)
    return reject("corrupted (checksum mismatch)");

  TocReader toc(std::string_view(reinterpret_cast<const char*>(base + kBody), h.toc_bytes));
  uint32_t count = 0;
  if (!toc.u32(count)) return reject("inconsistent (table of contents)");
  std::vector<std::pair<std::string, kernels::PackedWeight>> out;
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t name_len = 0, header_len = 0;
    uint64_t offset = 0;
    std::string_view name, header;
    if (!toc.u32(name_len) || !toc.bytes(name_len, name) || !toc.u32(header_len) ||
        !toc.bytes(header_len, header) || !toc.u64(offset) || offset % 64 != 0 ||
        offset > h.data_bytes)
      return reject("inconsistent (table of contents)");
    // The weight shares ownership of the mapping and points into it.
    std::shared_ptr<uint8_t> data(file, const_cast<uint8_t*>(base + h.data_offset + offset));
    auto w =
        kernels::PackedWeight::view_from_header(header, std::move(data), h.data_bytes - offset);
    if (!w) return reject("inconsistent (a weight's header)");
    out.emplace_back(std::string(name), std::move(*w));
  }
  if (!toc.done()) return reject("inconsistent (table of contents)");
  graph::touch_cache_entry(path);  // used now: eviction keeps it longest
  return out;
}

}  // namespace kiln::model
