// Every packed weight of a model in one cache file, memory-mapped on the next start: a warm
// start then costs reading this file (the packed bytes) instead of repacking from the model
// file, and the weights point into the mapping (file-backed pages, no copy; the model file's
// pages of those weights are never touched).
//
// Layout: a magic line, a header (key, sizes, checksum), a table of contents (per weight: its
// name and PackedWeight header), then the packed bytes of every weight, each at a 64-byte-
// aligned offset from a page-aligned start. The checksum (xxHash3) covers everything after the
// header, so verifying it reads the whole file once: the price of never trusting a damaged
// entry, and the same read the weights need anyway.
//
// Writes go to a temporary file in the same folder and are renamed into place, so a crash or a
// concurrent start never leaves a half-written file under the entry's name (two processes
// writing the same entry each rename a complete file; the last one stays; a killed writer's
// temporary file is removed by the next write). A file is never changed in place once
// renamed: a rejected one is removed, and a process that mapped it keeps its own (unlinked)
// copy.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kiln/kernels/packed_weight.h"

namespace kiln::model {

using NamedPackedWeight = std::pair<std::string, const kernels::PackedWeight*>;

// Writes the weights, in order, as the entry for `key`. Returns false after logging a warning
// when it cannot (full disk, read-only folder): the cache is an optimization, never a reason
// to fail.
bool write_packed_weights_file(const std::string& path, uint64_t key,
                               const std::vector<NamedPackedWeight>& weights);

// The weights of the entry at `path`, in file order, each a view into one shared read-only
// mapping of it; nullopt when there is no file, and also (after logging why and removing the
// file) when it is not a complete, intact entry for `key`: wrong magic or key, truncated,
// checksum mismatch, or a table that does not describe the data.
std::optional<std::vector<std::pair<std::string, kernels::PackedWeight>>> load_packed_weights_file(
    const std::string& path, uint64_t key);

}  // namespace kiln::model
