// The KV pages of the scheduler's requests: the pool, the prefix cache in front of it, and each
// request's block table (Sequence::pages, of which the first n_cached_pages belong to the cache,
// pinned through Sequence::node). Admission reserves pages for every token a request must
// (re)compute; decoding grows a request a page at a time; proposals take free pages only, and a
// verify step gives back the pages of rejected rows; a request that leaves hands its computed
// full pages to the prefix cache and the rest back to the pool. Which request gets preempted
// when pages run out is the scheduler's call (admission_budget.h, schedule_policy.h).
#pragma once
#include <cstdint>
#include <memory>

#include "kiln/engine/admission_budget.h"
#include "kiln/engine/kv_pool.h"
#include "kiln/engine/radix_cache.h"
#include "kiln/engine/sequence.h"

namespace kiln::engine {

class SequencePages {
 public:
  SequencePages(KvPool& pool, bool prefix_cache);
  ~SequencePages();  // returns the cached pages
  SequencePages(const SequencePages&) = delete;
  SequencePages& operator=(const SequencePages&) = delete;

  int page_size() const { return page_size_; }
  const KvPool& pool() const { return *pool_; }
  const RadixCache* prefix_cache() const { return cache_.get(); }  // null when disabled
  int64_t evictable_pages() const { return cache_ ? cache_->evictable_pages() : 0; }

  // Prompt tokens of a waiting request the prefix cache holds now (what lpm orders by).
  int64_t cached_prefix_tokens(const Sequence& seq) const;
  // Reserves pages for every token of `seq` (those the prefix cache serves are shared, pinned)
  // when they fit `budget`; false, and nothing held, when they do not. Counts the cache's
  // hits and queries into `stats`. The request is then Prefilling from its first uncached
  // token.
  bool reserve(Sequence& seq, const AdmissionBudget& budget, EngineStats& stats);
  // A page for the decoding request's next token (position n_kv): true when it has one (a free
  // page, or an evicted cached one); false when the pool is out (someone must be preempted).
  bool grow_for_decode(Sequence& seq);
  // Pages for the request's proposals' K/V: free pages only; proposals past them are dropped
  // (speculation never evicts or preempts).
  void grow_for_proposals(Sequence& seq);
  // After a verify step that kept K/V for n_kv positions: pages holding only rejected rows go
  // back to the pool.
  void keep_verified(Sequence& seq);
  // Publishes the request's newly completed full pages to the prefix cache, so that requests
  // with the same prefix share them right away (a shared system prompt is prefilled once).
  void publish_prefix(Sequence& seq);
  // Returns everything the request holds: its computed full pages to the prefix cache
  // (`to_cache`, when enabled), the rest to the pool. The request is Waiting again, with no
  // K/V.
  void release(Sequence& seq, bool to_cache);
  // Drops every unpinned prefix-cache entry.
  void flush_cache();

 private:
  // How much of the sequence the prefix cache may serve.
  static int64_t matchable_tokens(const Sequence& seq);

  KvPool* pool_;
  int page_size_;
  std::unique_ptr<RadixCache> cache_;  // null when the prefix cache is disabled
};

}  // namespace kiln::engine
