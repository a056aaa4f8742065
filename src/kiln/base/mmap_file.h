// A read-only memory map of a whole file. Weights stay in the page cache and are shared by
// every process serving the same model; tensors borrow ranges of it.
//
// Weights that are repacked at load are read once and never again from the map: their pages
// can leave this process's resident set (release_pages), which keeps a loaded model near its
// packed size instead of packed plus file.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace kiln {

class MmapFile {
 public:
  // Throws Error naming the path and the OS reason when the file cannot be opened or mapped.
  static std::shared_ptr<MmapFile> open(const std::string& path);
  ~MmapFile();
  MmapFile(const MmapFile&) = delete;
  MmapFile& operator=(const MmapFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

  // Drops the pages wholly inside [p, p + n) from this process's resident set when that range
  // lies inside a live MmapFile (any of them); returns the bytes dropped (0 for memory that is
  // not a mapped file: a converted tensor, an arena slot). Safe for bytes still in use: the
  // mapping is private and never written, so a later read faults the page back in from the
  // file (the page cache) with the same contents. Pages shared with a neighbouring range stay.
  static size_t release_pages(const void* p, size_t n);

 private:
  MmapFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace kiln
