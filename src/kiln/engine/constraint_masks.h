// The token masks of a step's constrained rows (JSON schemas and grammars), off the step's critical
// path. Each mask is a pure function of the matcher state (json_mask_cache.h), and every state a
// step needs is known before its forward pass runs: a decode row samples from the state its
// sequence is in, verify row j from that state after the first j proposals. So the scheduler hands
// the states over (prefetch) before the forward pass; a worker thread computes the masks the cache
// lacks while the model runs, and when the pass returns the scheduler thread takes the remaining
// ones itself (finish), so two rows' misses run on two threads. Sampling then reads the cache.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "kiln/engine/json/json_mask_cache.h"
#include "kiln/engine/json/token_trie.h"
#include "kiln/engine/token_text.h"

namespace kiln::engine {

class ConstraintMasks {
 public:
  // Masks are cached up to cache_bytes (least recently used dropped first).
  ConstraintMasks(const TokenText& tokenizer, int64_t vocab, size_t cache_bytes);
  ~ConstraintMasks();
  ConstraintMasks(const ConstraintMasks&) = delete;
  ConstraintMasks& operator=(const ConstraintMasks&) = delete;

  // The vocabulary as a byte trie, built on first use (a fraction of a second for 262,144
  // tokens). End-of-generation ids are left out: a mask adds them only when the value is
  // complete.
  const TokenTrie& trie();

  // One row to mask: the state it samples from, the ids that may end it.
  struct Row {
    ConstraintMatcher matcher;
    std::span<const int32_t> end_ids;  // must outlive finish()
  };
  // Starts computing the rows' masks on the worker; returns at once. At most one prefetch is
  // open at a time: finish() closes it.
  void prefetch(std::vector<Row> rows);
  // Computes what the worker has not started, then waits for the rest. Returns the seconds the
  // caller spent here (the mask time the step could not hide).
  double finish();

  // The mask at `matcher`'s state: cached (a prefetched row's always is, unless evicted), or
  // computed now.
  std::shared_ptr<const TokenMask> mask(const ConstraintMatcher& matcher,
                                        std::span<const int32_t> end_ids);
  JsonMaskCache::Stats cache_stats() const;

 private:
  void worker_loop();
  void compute_pending();  // claims rows until none is left

  const TokenText& tokenizer_;
  const int64_t vocab_;
  const size_t cache_bytes_;
  std::unique_ptr<TokenTrie> trie_;
  std::unique_ptr<JsonMaskCache> cache_;

  std::vector<Row> rows_;
  std::atomic<size_t> next_row_{0};
  size_t rows_done_ = 0;  // under mutex_
  uint64_t generation_ = 0;
  bool open_ = false;         // a prefetch is open: the worker may join it
  bool worker_busy_ = false;  // the worker is inside compute_pending
  bool stop_ = false;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::thread worker_;  // started by the first prefetch
};

}  // namespace kiln::engine
