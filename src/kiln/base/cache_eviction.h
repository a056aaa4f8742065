// Keeps the cache folder (compiled plans, *.kgc, and packed-weights files, *.kpw) within a
// size bound. Every rebuilt kiln and every changed model file gets new keys, so without a bound
// old entries pile up for ever (a packed-weights file is as large as the model's packed
// weights; plans are small but numerous).
//
// Least recently used goes first: a hit refreshes an entry's modification time
// (cache_file::touch), a store writes a new file, so the time says when an entry last served.
// Entries used since `protect_since` (the process's start: what this run loaded or wrote) are
// never removed, even when they alone exceed the bound, so a run never evicts its own entries
// and repacks them next time. Removing an entry another running process has mapped is safe on
// Linux (its mapping stays valid); that process repacks at its next start.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>

namespace kiln::cache_file {

struct CacheEvictionReport {
  int64_t files_removed = 0;
  uint64_t bytes_removed = 0;
  uint64_t bytes_kept = 0;  // what the folder's entries total afterwards
};

// Removes the least recently used *.kgc and *.kpw files under `dir` (and its sub-folders, where
// tensor-parallel ranks keep theirs) until they total at most `max_bytes`, never one modified at
// or after `protect_since`. Other files are left alone. A missing folder is empty; files that
// vanish meanwhile (another process evicting) are skipped. Never throws.
CacheEvictionReport evict_least_recently_used(const std::string& dir, uint64_t max_bytes,
                                              std::filesystem::file_time_type protect_since);

}  // namespace kiln::cache_file
