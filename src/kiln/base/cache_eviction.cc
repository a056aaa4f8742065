#include "kiln/base/cache_eviction.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <algorithm>
#include <vector>

#include "kiln/base/cache_file.h"
#include "kiln/base/log.h"

namespace kiln::cache_file {
namespace {

struct Entry {
  std::filesystem::path path;
  std::filesystem::file_time_type used;
  uint64_t bytes = 0;
};

bool is_cache_entry(const std::filesystem::path& p) {
  const auto ext = p.extension();
  return ext == kCompiledPlanExtension || ext == kPackedWeightsExtension;
}

std::vector<Entry> list_entries(const std::string& dir) {
  std::vector<Entry> entries;
  std::error_code ec;
  std::filesystem::recursive_directory_iterator it(
      dir, std::filesystem::directory_options::skip_permission_denied, ec);
  for (; !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code fec;
    if (!it->is_regular_file(fec) || !is_cache_entry(it->path())) continue;
    Entry e;
    e.path = it->path();
    e.used = it->last_write_time(fec);
    if (fec) continue;
    e.bytes = it->file_size(fec);
    if (fec) continue;
    entries.push_back(std::move(e));
  }
  return entries;
}

}  // namespace

CacheEvictionReport evict_least_recently_used(const std::string& dir, uint64_t max_bytes,
                                              std::filesystem::file_time_type protect_since) {
  CacheEvictionReport report;
  if (dir.empty()) return report;
  std::vector<Entry> entries = list_entries(dir);
  uint64_t total = 0;
  for (const Entry& e : entries) total += e.bytes;
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.used < b.used; });
  for (const Entry& e : entries) {
    if (total <= max_bytes || e.used >= protect_since) break;
    std::error_code ec;
    if (std::filesystem::remove(e.path, ec)) {
      total -= e.bytes;
      ++report.files_removed;
      report.bytes_removed += e.bytes;
    } else if (!ec) {
      total -= e.bytes;  // already gone: another process evicted it
    }
  }
  report.bytes_kept = total;
  if (report.files_removed > 0)
    KILN_LOG_INFO("cache {}: removed {} least recently used entries ({:.1f} MiB), {:.1f} MiB kept",
                  dir, report.files_removed, report.bytes_removed / 1048576.0, total / 1048576.0);
  if (total > max_bytes)
    KILN_LOG_WARN("cache {}: this run's entries alone take {:.1f} MiB, above the {:.1f} MiB bound",
                  dir, total / 1048576.0, max_bytes / 1048576.0);
  return report;
}

}  // namespace kiln::cache_file
