// Radix tree over token ids at page granularity: the prefix cache (docs/architecture.md, Terms:
// "Engine").
//
// Every edge holds a whole number of pages of tokens, and its node owns those KV pages: only
// full pages are ever shared, so a shared page is never written again. Children are keyed by
// the tokens of their first page. Running requests pin the path they use with lock()/unlock()
// (reference counts along the path to the root); unpinned nodes are evictable, leaves first,
// least recently used first, and eviction returns their pages to the KvPool.
//
// Ownership hand-off: insert() takes ownership of the caller's pages for the part of the
// sequence not cached yet; for pages whose tokens are already cached it frees the caller's
// duplicate and substitutes the cached page in the caller's block table (same tokens at the
// same positions, so the same K/V). Single-threaded: the scheduler thread owns it.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "kiln/engine/kv_pool.h"

namespace kiln::engine {

class RadixCache {
 public:
  struct Node;

  struct Match {
    int64_t n_tokens = 0;        // matched tokens (a multiple of the page size)
    std::vector<int32_t> pages;  // their pages, in order
    Node* node = nullptr;        // deepest matched node (lock it to keep the pages)
  };

  explicit RadixCache(KvPool& pool);
  ~RadixCache();  // returns every cached page to the pool
  RadixCache(const RadixCache&) = delete;
  RadixCache& operator=(const RadixCache&) = delete;

  int page_size() const { return page_size_; }

  // Longest cached prefix of `ids` in whole pages. Marks the path as recently used. May split
  // a node so that the match ends on a node boundary.
  Match match_prefix(std::span<const int32_t> ids);
  // The length match_prefix would return, without its side effects (no split, no LRU touch):
  // for ordering requests by what they would reuse, before any is admitted.
  int64_t cached_prefix_tokens(std::span<const int32_t> ids) const;

  // Caches the first pages.size() pages of `ids` (needs ids.size() >= pages.size() * page
  // size). Pages already cached under the same tokens replace the caller's in `pages` (the
  // caller's duplicates are freed); the rest become the cache's. Returns the node of the last
  // page (the root when pages is empty); lock it if the caller keeps using the pages.
  Node* insert(std::span<const int32_t> ids, std::span<int32_t> pages);

  // Pins / unpins a node and its ancestors against eviction. nullptr is a no-op.
  void lock(Node* node);
  void unlock(Node* node);

  // Frees at least n pages of unpinned nodes if that many exist (LRU leaves first).
  // Returns the number of pages freed.
  int64_t evict(int64_t n_pages);
  // Frees every unpinned page. Returns the number freed.
  int64_t flush() { return evict(cached_pages_); }

  int64_t cached_pages() const { return cached_pages_; }        // owned by the tree
  int64_t evictable_pages() const { return evictable_pages_; }  // owned and unpinned
  int64_t node_count() const { return node_count_; }

  // Recomputes the counters from the tree and checks the structure (tests); throws on error.
  void check_invariants() const;

 private:
  Node* split(Node* node, size_t n_pages);
  void touch(Node* node);

  KvPool* pool_;
  int page_size_;
  std::unique_ptr<Node> root_;
  uint64_t clock_ = 0;  // logical time for LRU
  int64_t cached_pages_ = 0;
  int64_t evictable_pages_ = 0;
  int64_t node_count_ = 0;
};

}  // namespace kiln::engine
