// The on-disk compile cache: one file per key under the user's cache directory, holding what
// capture produced (each plan's optimized graph as text IR, or the template it is rebatched
// from, and its memory plan) and the packed forms of merged weights (model/weight_store.cc), so
// that a warm start skips trace, passes, planning and repacking.
//
// Entries carry a format version and a checksum of their payload; a corrupted, truncated or
// foreign entry is reported once, deleted and rebuilt. Writes go to a temporary file in the
// same directory and are renamed into place, so a concurrent reader sees either the old entry,
// none, or the complete new one — never half of it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kiln::graph {

class CompileCache {
 public:
  // `dir` empty: the cache is disabled (every load misses, stores do nothing).
  explicit CompileCache(std::string dir);

  // --cache-dir if given, else $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln;
  // empty (the cache disabled) when none of them is set.
  static std::string resolve_dir(const std::string& flag_value);

  bool enabled() const { return !dir_.empty(); }
  const std::string& dir() const { return dir_; }
  std::string path_for(uint64_t key) const;

  // The payload stored under `key`, or nullopt on a miss. A damaged entry logs a warning,
  // is removed, and counts as a miss.
  std::optional<std::string> load(uint64_t key) const;
  // Stores atomically; failures (read-only disk, full disk) log a warning and are otherwise
  // ignored: the cache is an optimization, never a reason to fail.
  void store(uint64_t key, std::string_view payload) const;

 private:
  std::string dir_;
};

// 64-bit hash (xxHash) of everything a cache entry depends on, given as one string.
uint64_t cache_key(std::string_view description);
// The running executable's size and modification time ("unknown" without /proc): stands for
// the code that produced an entry, so a rebuilt kiln never reuses an older build's entries.
std::string executable_identity();

}  // namespace kiln::graph
