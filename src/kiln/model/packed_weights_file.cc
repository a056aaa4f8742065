#include "kiln/model/packed_weights_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string_view>

#include "kiln/base/cache_file.h"
#include "kiln/base/log.h"
#include "kiln/base/mmap_file.h"

namespace kiln::model {
namespace {

// Bump when the layout changes: older files then read as foreign and are rebuilt.
constexpr char kMagic[32] = "KILN-PACKED-WEIGHTS v3\n";

struct Header {
  uint64_t key;
  uint64_t data_offset;  // page-aligned file offset of the packed bytes
  uint64_t data_bytes;
  uint64_t toc_offset;  // the table of contents: 64-byte aligned, after the data, to the end
  uint64_t toc_bytes;
  uint64_t checksum;  // xxHash3 of [end of this header, end of file)
};

constexpr size_t kBody = sizeof kMagic + sizeof(Header);
constexpr size_t kPage = 4096;
constexpr size_t kDataOffset = kPage;  // the magic and header fill the first page

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

}  // namespace

std::unique_ptr<PackedWeightsFileWriter> PackedWeightsFileWriter::create(const std::string& path,
                                                                         uint64_t key,
                                                                         size_t max_data_bytes) {
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  cache_file::remove_orphaned_temporaries(path);
  std::unique_ptr<PackedWeightsFileWriter> w(new PackedWeightsFileWriter);
  w->path_ = path;
  w->tmp_ = cache_file::temporary_path(path);
  w->key_ = key;
  w->reserved_ = align_up(kDataOffset + max_data_bytes, kPage);
  auto fail = [&](const char* what) -> std::unique_ptr<PackedWeightsFileWriter> {
    KILN_LOG_WARN("cannot write packed weights cache {} ({}: {}); running without it", w->tmp_,
                  what, std::strerror(errno));
    return nullptr;  // the destructor closes and removes what was made
  };
  w->fd_ = ::open(w->tmp_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (w->fd_ < 0) return fail("open");
  // Blocks reserved now: a full disk fails here, not as SIGBUS on a page fault mid-packing.
  if (::fallocate(w->fd_, 0, 0, static_cast<off_t>(w->reserved_)) != 0)
    return fail("reserving space");
  void* base = ::mmap(nullptr, w->reserved_, PROT_READ | PROT_WRITE, MAP_SHARED, w->fd_, 0);
  if (base == MAP_FAILED) return fail("mmap");
  // The kernels read these pages every step: asked for as 2 MiB folios, they are mapped with
  // huge pages like the arena's (advisory: where refused, it only costs speed).
  ::madvise(base, w->reserved_, MADV_HUGEPAGE);
  const size_t bytes = w->reserved_;
  w->mapping_ = std::shared_ptr<uint8_t>(static_cast<uint8_t*>(base),
                                         [bytes](uint8_t* p) { ::munmap(p, bytes); });
  w->used_ = kDataOffset;
  return w;
}

PackedWeightsFileWriter::~PackedWeightsFileWriter() {
  if (fd_ >= 0) ::close(fd_);
  if (!finished_) ::unlink(tmp_.c_str());
}

std::shared_ptr<uint8_t> PackedWeightsFileWriter::allocate(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t at = align_up(used_, 64);
  if (finished_ || at + bytes > reserved_) return nullptr;
  used_ = at + bytes;
  return std::shared_ptr<uint8_t>(mapping_, mapping_.get() + at);
}

bool PackedWeightsFileWriter::finish(const std::vector<NamedPackedWeight>& weights) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return false;
  auto fail = [&](const std::string& why) {
    KILN_LOG_WARN("cannot write packed weights cache {}: {}; running without it", path_, why);
    return false;
  };
  const uint8_t* data = mapping_.get() + kDataOffset;
  const size_t data_bytes = used_ - kDataOffset;
  std::string toc;
  put_u32(toc, static_cast<uint32_t>(weights.size()));
  for (const auto& [name, w] : weights) {
    const size_t offset = static_cast<size_t>(w->data() - data);
    if (w->data() < data || offset + w->bytes() > data_bytes)
      return fail("weight " + name + " was not packed into it (out of reserved space)");
    const std::string header = w->serialize_header();
    put_u32(toc, static_cast<uint32_t>(name.size()));
    toc += name;
    put_u32(toc, static_cast<uint32_t>(header.size()));
    toc += header;
    put_u64(toc, offset);
  }
  const size_t toc_offset = align_up(used_, 64);
  // Checksum of [end of header, end of file): the zeros before the data, the data and the
  // padding after it as the mapping holds them, then the table of contents.
  XXH3_state_t* state = XXH3_createState();
  XXH3_64bits_reset(state);
  XXH3_64bits_update(state, mapping_.get() + kBody, toc_offset - kBody);
  XXH3_64bits_update(state, toc.data(), toc.size());
  const Header h{key_, kDataOffset, data_bytes, toc_offset, toc.size(), XXH3_64bits_digest(state)};
  XXH3_freeState(state);
  auto pwrite_all = [&](const void* p, size_t n, size_t at) {
    const char* c = static_cast<const char*>(p);
    while (n > 0) {
      const ssize_t w = ::pwrite(fd_, c, n, static_cast<off_t>(at));
      if (w <= 0) return false;
      c += w;
      n -= static_cast<size_t>(w);
      at += static_cast<size_t>(w);
    }
    return true;
  };
  // No fsync (it cost seconds per GB on the cold start): a process that dies before the rename
  // leaves only its temporary file, and a file torn by a power loss after it fails the size or
  // checksum check on load and is rebuilt, never trusted.
  const bool ok = pwrite_all(toc.data(), toc.size(), toc_offset) &&
                  pwrite_all(kMagic, sizeof kMagic, 0) && pwrite_all(&h, sizeof h, sizeof kMagic) &&
                  ::ftruncate(fd_, static_cast<off_t>(toc_offset + toc.size())) == 0 &&
                  cache_file::rename_into_place(tmp_, path_);
  if (!ok) return fail(std::strerror(errno));
  finished_ = true;
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
    cache_file::discard(path, "packed weights cache", why, "repacking and rewriting it");
    return std::nullopt;
  };
  const size_t size = file->size();
  const auto* base = file->data();
  if (size < kBody || std::memcmp(base, kMagic, sizeof kMagic) != 0)
    return reject("not a packed weights file of this version");
  Header h{};
  std::memcpy(&h, base + sizeof kMagic, sizeof h);
  if (h.key != key) return reject("for another key");
  if (h.data_offset % kPage != 0 || h.data_offset < kBody || h.toc_offset % 64 != 0 ||
      h.toc_offset > size || h.toc_offset < h.data_offset ||
      h.data_bytes > h.toc_offset - h.data_offset || size - h.toc_offset != h.toc_bytes)
    return reject("truncated");
  // Huge pages for what is not yet in the page cache (as the writer asks), then read ahead:
  // verifying reads every page, and the weights are used from these pages.
  ::madvise(const_cast<uint8_t*>(base), size, MADV_HUGEPAGE);
  ::madvise(const_cast<uint8_t*>(base), size, MADV_WILLNEED);
  if (cache_file::checksum(base + kBody, size - kBody) != h.checksum)
    return reject("corrupted (checksum mismatch)");

  TocReader toc(std::string_view(reinterpret_cast<const char*>(base + h.toc_offset), h.toc_bytes));
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
  cache_file::touch(path);  // used now: eviction keeps it longest
  return out;
}

}  // namespace kiln::model
