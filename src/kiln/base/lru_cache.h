// A thread-safe map from string keys to shared values that drops the least recently used
// entries past a count or a byte budget (the caller says what each value weighs). Lookups and
// insertions lock; computing a missing value is the caller's, outside the lock, so two threads
// may compute the same key and the first insertion wins.
#pragma once
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace kiln {

template <typename Value>
class LruCache {
 public:
  LruCache(size_t max_entries, size_t max_bytes)
      : max_entries_(max_entries), max_bytes_(max_bytes) {}

  struct Stats {
    uint64_t hits = 0, misses = 0, evictions = 0;
    size_t entries = 0, bytes = 0;
  };

  // The value under `key` (now the most recently used), or null; counts a hit or a miss.
  std::shared_ptr<const Value> find(const std::string& key) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = entries_.find(key);
    if (it == entries_.end()) {
      ++stats_.misses;
      return nullptr;
    }
    ++stats_.hits;
    ages_.splice(ages_.begin(), ages_, it->second.age);
    return it->second.value;
  }

  // Keeps `value` under `key` and returns it, or returns the value another thread kept there
  // first. A value heavier than the whole budget is returned without being kept.
  std::shared_ptr<const Value> insert(const std::string& key, std::shared_ptr<const Value> value,
                                      size_t bytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (const auto it = entries_.find(key); it != entries_.end()) return it->second.value;
    if (bytes > max_bytes_) return value;
    ages_.push_front(key);
    entries_.emplace(key, Entry{value, bytes, ages_.begin()});
    stats_.bytes += bytes;
    while (entries_.size() > max_entries_ || stats_.bytes > max_bytes_) {
      const auto victim = entries_.find(ages_.back());
      stats_.bytes -= victim->second.bytes;
      entries_.erase(victim);
      ages_.pop_back();
      ++stats_.evictions;
    }
    return value;
  }

  Stats stats() const {
    std::lock_guard<std::mutex> lock(mutex_);
    Stats s = stats_;
    s.entries = entries_.size();
    return s;
  }

 private:
  struct Entry {
    std::shared_ptr<const Value> value;
    size_t bytes = 0;
    std::list<std::string>::iterator age;
  };
  const size_t max_entries_, max_bytes_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, Entry> entries_;
  std::list<std::string> ages_;  // most recently used first
  Stats stats_;
};

}  // namespace kiln
