#include "kiln/engine/sequence_pages.h"

#include <algorithm>
#include <span>
#include <vector>

#include "kiln/base/error.h"

namespace kiln::engine {

// clang-analyzer takes KvPool::free for libc free (as in kv_pool.cc).
// NOLINTBEGIN(clang-analyzer-unix.Malloc)

SequencePages::SequencePages(KvPool& pool, bool prefix_cache)
    : pool_(&pool), page_size_(pool.page_size()) {
  if (prefix_cache) cache_ = std::make_unique<RadixCache>(pool);
}

SequencePages::~SequencePages() = default;

int64_t SequencePages::matchable_tokens(const Sequence& seq) {
  // Never the last token: its logits are needed, so at least one row must run. Nor any row
  // whose logits score a prompt token not yet scored: cached rows have none. Nor any row of
  // an embedding request that wants every row's hidden state: cached rows have none either.
  if (seq.request.hidden == HiddenOutput::kMean) return 0;
  return seq.scoring() ? seq.next_scoring_row() : static_cast<int64_t>(seq.tokens.size()) - 1;
}

int64_t SequencePages::cached_prefix_tokens(const Sequence& seq) const {
  if (!cache_) return 0;
  return cache_->cached_prefix_tokens(
      std::span<const int32_t>(seq.tokens.data(), matchable_tokens(seq)));
}

bool SequencePages::reserve(Sequence& seq, const AdmissionBudget& budget, EngineStats& stats) {
  RadixCache::Match match;
  const auto n_tokens = static_cast<int64_t>(seq.tokens.size());
  if (cache_) {
    match =
        cache_->match_prefix(std::span<const int32_t>(seq.tokens.data(), matchable_tokens(seq)));
    cache_->lock(match.node);
  }
  const int64_t need = ceil_div(n_tokens, page_size_) - static_cast<int64_t>(match.pages.size());
  if (!budget.pages_fit(need, pool_->free_pages(), evictable_pages())) {
    if (cache_) cache_->unlock(match.node);
    return false;
  }
  if (pool_->free_pages() < need) cache_->evict(need - pool_->free_pages());
  seq.pages = std::move(match.pages);
  const bool ok = pool_->alloc(need, seq.pages);
  KILN_CHECK(ok, "KV pool accounting error: {} pages promised but not free", need);
  seq.n_cached_pages = seq.pages.size() - static_cast<size_t>(need);
  seq.node = match.node;
  seq.n_kv = match.n_tokens;
  seq.state = Sequence::State::Prefilling;
  if (seq.cached_tokens < 0) seq.cached_tokens = static_cast<int>(match.n_tokens);
  stats.prefix_cache_hit_tokens += match.n_tokens;
  stats.prefix_cache_query_tokens += n_tokens;
  return true;
}

bool SequencePages::grow_for_decode(Sequence& seq) {
  // The new token goes to position n_kv; grow the block table until it covers it.
  while (static_cast<int64_t>(seq.pages.size()) * page_size_ <= seq.n_kv) {
    switch (decode_page_source(pool_->free_pages(), evictable_pages())) {
      case PageSource::EvictCached:
        cache_->evict(1);
        if (pool_->free_pages() == 0) return false;
        break;
      case PageSource::PreemptLeastProtected:
        return false;
      case PageSource::Free:
        break;
    }
    pool_->alloc(1, seq.pages);
  }
  return true;
}

void SequencePages::grow_for_proposals(Sequence& seq) {
  std::vector<int32_t>& draft = seq.spec.draft;
  const auto last_pos = [&] { return seq.n_kv + static_cast<int64_t>(draft.size()); };
  while (!draft.empty() && static_cast<int64_t>(seq.pages.size()) * page_size_ <= last_pos()) {
    if (pool_->free_pages() == 0) {
      draft.resize(static_cast<size_t>(std::max<int64_t>(
          0, static_cast<int64_t>(seq.pages.size()) * page_size_ - seq.n_kv - 1)));
      break;
    }
    pool_->alloc(1, seq.pages);
  }
}

void SequencePages::keep_verified(Sequence& seq) {
  const auto keep =
      std::max<size_t>(static_cast<size_t>(ceil_div(seq.n_kv, page_size_)), seq.n_cached_pages);
  if (seq.pages.size() <= keep) return;
  std::vector<int32_t> surplus(seq.pages.begin() + static_cast<ptrdiff_t>(keep), seq.pages.end());
  seq.pages.resize(keep);
  pool_->free(surplus);
}

void SequencePages::publish_prefix(Sequence& seq) {
  if (!cache_) return;
  const auto n_full = static_cast<size_t>(seq.n_kv / page_size_);
  if (n_full <= seq.n_cached_pages) return;
  RadixCache::Node* node = cache_->insert(
      std::span<const int32_t>(seq.tokens.data(), n_full * static_cast<size_t>(page_size_)),
      std::span<int32_t>(seq.pages.data(), n_full));
  cache_->lock(node);
  cache_->unlock(seq.node);
  seq.node = node;
  seq.n_cached_pages = n_full;
}

void SequencePages::release(Sequence& seq, bool to_cache) {
  if (seq.state == Sequence::State::Waiting) return;  // holds nothing
  size_t first_owned = seq.n_cached_pages;
  if (cache_ && to_cache) {
    // Hand every fully computed page to the prefix cache (duplicates of cached pages are
    // freed by insert and replaced in our table).
    const auto n_full = static_cast<size_t>(seq.n_kv / page_size_);
    if (n_full > 0) {
      cache_->insert(
          std::span<const int32_t>(seq.tokens.data(), n_full * static_cast<size_t>(page_size_)),
          std::span<int32_t>(seq.pages.data(), n_full));
      first_owned = std::max(first_owned, n_full);
    }
  }
  if (cache_) cache_->unlock(seq.node);
  std::vector<int32_t> owned(seq.pages.begin() + static_cast<ptrdiff_t>(first_owned),
                             seq.pages.end());
  pool_->free(owned);
  seq.pages.clear();
  seq.n_cached_pages = 0;
  seq.node = nullptr;
  seq.n_kv = 0;
  seq.state = Sequence::State::Waiting;
}

void SequencePages::flush_cache() {
  if (cache_) cache_->flush();
}

// NOLINTEND(clang-analyzer-unix.Malloc)

}  // namespace kiln::engine
