// Every packed weight of a model in one cache file, memory-mapped on the next start: a warm
// start then costs reading this file (the packed bytes) instead of repacking from the model
// file, and the weights point into the mapping (file-backed pages, no copy; the model file's
// pages of those weights are never touched).
//
// Layout: a magic line and a header (key, offsets, checksum) in the first page, then the packed
// bytes of every weight, each at a 64-byte-aligned offset from the page-aligned data start, then a
// table of contents (per weight: its name, PackedWeight header and offset). The checksum
// (xxHash3) covers everything after the header, so verifying it reads the whole file once: the
// price of never trusting a damaged entry, and the same read the weights need anyway.
//
// A cold start packs straight into the file (PackedWeightsFileWriter): the weights' bytes are
// pages of a shared mapping of it, so nothing is copied into the page cache afterwards and the
// process ends up holding the same file pages a warm start maps. Writes go to a temporary file
// in the same folder and are renamed into place, so a crash or a concurrent start never leaves a
// half-written file under the entry's name (two processes writing the same entry each rename a
// complete file; the last one stays; a killed writer's temporary file is removed by the next
// write). A file is never changed in place once renamed: a rejected one is removed, and a
// process that mapped it keeps its own (unlinked) copy.
#pragma once
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/kernels/packed_weight.h"

namespace kiln::model {

using NamedPackedWeight = std::pair<std::string, const kernels::PackedWeight*>;

// A new entry being packed into: allocate() hands out pieces of a shared writable mapping of
// `<path>.tmp.<pid>` (space reserved up front, so a full disk fails create(), never a page fault
// mid-packing); finish() writes the table of contents and the header and renames the file into
// place. The pieces stay valid for as long as anything holds one, whatever happens to the file.
// Thread-safe.
class PackedWeightsFileWriter {
 public:
  // Null, after a warning, when the file cannot be made (read-only folder, full disk, a file
  // system without fallocate): the cache is an optimization, never a reason to fail.
  static std::unique_ptr<PackedWeightsFileWriter> create(const std::string& path, uint64_t key,
                                                         size_t max_data_bytes);
  ~PackedWeightsFileWriter();  // removes the temporary file unless finish() renamed it
  PackedWeightsFileWriter(const PackedWeightsFileWriter&) = delete;
  PackedWeightsFileWriter& operator=(const PackedWeightsFileWriter&) = delete;

  // A 64-byte-aligned piece of the data area; null once the reserved space is used up.
  std::shared_ptr<uint8_t> allocate(size_t bytes);
  // Makes the entry: `weights`, in order, must lie in pieces of this file. False, after a
  // warning, when one does not or a write fails (the weights stay usable either way).
  bool finish(const std::vector<NamedPackedWeight>& weights);
  const std::string& path() const { return path_; }  // the entry's name once finished

 private:
  PackedWeightsFileWriter() = default;

  std::mutex mu_;
  std::string path_, tmp_;
  uint64_t key_ = 0;
  int fd_ = -1;
  std::shared_ptr<uint8_t> mapping_;
  size_t reserved_ = 0;  // bytes of the file and of the mapping
  size_t used_ = 0;      // end of the last piece
  bool finished_ = false;
};

// The weights of the entry at `path`, in file order, each a view into one shared read-only
// mapping of it; nullopt when there is no file, and also (after logging why and removing the
// file) when it is not a complete, intact entry for `key`: wrong magic or key, truncated,
// checksum mismatch, or a table that does not describe the data.
std::optional<std::vector<std::pair<std::string, kernels::PackedWeight>>> load_packed_weights_file(
    const std::string& path, uint64_t key);

}  // namespace kiln::model
