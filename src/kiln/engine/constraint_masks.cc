#include "kiln/engine/constraint_masks.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>

namespace kiln::engine {

ConstraintMasks::ConstraintMasks(const TokenText& tokenizer, int64_t vocab, size_t cache_bytes)
    : tokenizer_(tokenizer), vocab_(vocab), cache_bytes_(cache_bytes) {}

ConstraintMasks::~ConstraintMasks() {
  if (!worker_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  worker_.join();
}

const TokenTrie& ConstraintMasks::trie() {
  if (!trie_) {
    std::vector<std::pair<int32_t, std::string>> tokens;
    const int64_t n = std::min(vocab_, tokenizer_.vocab_size());
    for (int32_t t = 0; t < n; ++t) {
      if (tokenizer_.is_end_of_generation(t)) continue;
      if (std::optional<std::string> b = tokenizer_.token_bytes(t)) tokens.emplace_back(t, *b);
    }
    trie_ = std::make_unique<TokenTrie>(std::move(tokens));
    cache_ = std::make_unique<JsonMaskCache>(*trie_, vocab_, cache_bytes_);
  }
  return *trie_;
}

void ConstraintMasks::prefetch(std::vector<Row> rows) {
  if (rows.empty()) return;
  trie();  // built here, on the caller, before the worker reads it
  {
    std::lock_guard<std::mutex> lock(mutex_);
    rows_ = std::move(rows);
    next_row_.store(0);
    rows_done_ = 0;
    open_ = true;
    ++generation_;
  }
  if (!worker_.joinable()) worker_ = std::thread([this] { worker_loop(); });
  wake_.notify_one();
}

void ConstraintMasks::compute_pending() {
  for (;;) {
    const size_t i = next_row_.fetch_add(1);
    if (i >= rows_.size()) return;
    try {
      cache_->get(rows_[i].matcher, rows_[i].end_ids);
    } catch (...) {
      // Left uncached: sampling computes it again and reports the error on its request.
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (++rows_done_ == rows_.size()) done_.notify_all();
  }
}

double ConstraintMasks::finish() {
  if (rows_.empty()) return 0;
  const auto start = std::chrono::steady_clock::now();
  compute_pending();
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [this] { return rows_done_ == rows_.size() && !worker_busy_; });
  // Closed under the lock: a worker that wakes only now finds nothing to join, and rows_ is
  // no longer read by anyone.
  open_ = false;
  rows_.clear();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void ConstraintMasks::worker_loop() {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || (open_ && generation_ != seen); });
      if (stop_) return;
      seen = generation_;
      worker_busy_ = true;
    }
    compute_pending();
    std::lock_guard<std::mutex> lock(mutex_);
    worker_busy_ = false;
    done_.notify_all();
  }
}

std::shared_ptr<const TokenMask> ConstraintMasks::mask(const ConstraintMatcher& matcher,
                                                       std::span<const int32_t> end_ids) {
  trie();
  return cache_->get(matcher, end_ids);
}

JsonMaskCache::Stats ConstraintMasks::cache_stats() const {
  return cache_ ? cache_->stats() : JsonMaskCache::Stats{};
}

}  // namespace kiln::engine
