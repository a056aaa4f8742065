// A read-only memory map of a whole file. Weights stay in the page cache and are shared by
// every process serving the same model; tensors borrow ranges of it.
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

 private:
  MmapFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace kiln
