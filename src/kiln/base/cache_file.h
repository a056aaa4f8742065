// What every on-disk cache entry of kiln has in common (compiled plans, graph/compile_cache.h;
// packed weights, model/packed_weights_file.h; the size bound over both, cache_eviction.h):
// names by extension, a checksum, a temporary file in the same folder renamed into place (so a
// reader sees the old entry, none, or the complete new one, never half of it), damaged entries
// reported and removed rather than trusted, and use recorded in the modification time.
// Each format keeps its own magic line and header; this is the ground they stand on.
#pragma once
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace kiln::cache_file {

constexpr std::string_view kCompiledPlanExtension = ".kgc";
constexpr std::string_view kPackedWeightsExtension = ".kpw";

// xxHash3 of `bytes`, the checksum every entry carries.
uint64_t checksum(const void* data, size_t bytes);

// `<path>.tmp.<pid>`: where an entry is written before rename_into_place().
std::string temporary_path(const std::string& path);
// Renames a complete temporary file to the entry's name (atomic: same folder).
bool rename_into_place(const std::string& temporary, const std::string& path);
// Writes `pieces` one after another into a temporary file, syncs it and renames it into place.
// False (errno says why) when a step fails; the temporary file is then removed.
bool write_atomically(const std::string& path, std::initializer_list<std::string_view> pieces);
// Removes `<path>.tmp.<pid>` files of processes that no longer run (killed mid-write).
void remove_orphaned_temporaries(const std::string& path);

// Logs "<what> <path> is <why>; <then>" and removes the entry: a damaged, truncated or foreign
// entry is rebuilt, never used.
void discard(const std::string& path, std::string_view what, std::string_view why,
             std::string_view then);
// Marks an entry as used now (its modification time), so eviction keeps it longest. Failures
// (read-only folder) are ignored: the entry is then only older than it should be.
void touch(const std::string& path);

}  // namespace kiln::cache_file
