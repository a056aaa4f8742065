// Reader for safetensors files (Hugging Face checkpoints): an 8-byte little-endian header
// length, a JSON header {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}},
// then the data section. Tensors are borrowed from a read-only memory map.
//
// Everything the header states is checked at open, each problem one kiln::Error naming the
// file: a truncated file, a header length beyond the file, JSON that is not an object of tensor
// entries, offsets out of range or overlapping, a byte range that does not match shape x dtype,
// and dtypes other than F32, F16 and BF16 (the only ones kiln computes with) and U8 (raw bytes,
// served as I8: MXFP4 blocks and scales); an unknown dtype name is reported as unknown, a known
// one as unsupported.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kiln/base/dtype.h"
#include "kiln/base/shape.h"
#include "kiln/base/tensor.h"

namespace kiln::model {

struct SafetensorsTensorInfo {
  std::string name;
  DType dtype = DType::F32;
  Shape shape;
  uint64_t begin = 0;  // byte range within the data section
  uint64_t end = 0;
};

class SafetensorsFile {
 public:
  // Leaves a tensor out (not validated, not found): BERT checkpoints carry integer buffers
  // (embeddings.position_ids) that are no weights.
  using SkipTensor = std::function<bool(std::string_view name)>;
  // Maps the file and validates its header. Throws Error naming the path and the problem.
  static std::shared_ptr<SafetensorsFile> open(const std::string& path,
                                               const SkipTensor& skip = nullptr);
  // Parses bytes already in memory (tests); `keepalive` owns them, `name` replaces the path.
  static std::shared_ptr<SafetensorsFile> from_bytes(const uint8_t* data, size_t size,
                                                     std::shared_ptr<const void> keepalive,
                                                     std::string name);

  const std::string& path() const { return path_; }
  const std::vector<SafetensorsTensorInfo>& tensors() const { return tensors_; }  // by offset
  const SafetensorsTensorInfo* find(std::string_view name) const;  // null when absent
  // The tensor's bytes, borrowed from the file (the Tensor keeps the mapping alive). Throws
  // when absent.
  Tensor tensor(std::string_view name) const;

 private:
  SafetensorsFile() = default;
  void parse(const SkipTensor& skip);

  std::string path_;
  std::shared_ptr<const void> keepalive_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  uint64_t data_offset_ = 0;
  std::vector<SafetensorsTensorInfo> tensors_;
  std::unordered_map<std::string, size_t> index_;
};

}  // namespace kiln::model
