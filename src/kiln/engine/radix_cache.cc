#include "kiln/engine/radix_cache.h"

#include <algorithm>
#include <queue>

#include "kiln/base/error.h"

namespace kiln::engine {

struct RadixCache::Node {
  Node* parent = nullptr;
  std::vector<int32_t> tokens;  // the edge: pages.size() * page_size tokens
  std::vector<int32_t> pages;
  std::map<std::vector<int32_t>, std::unique_ptr<Node>> children;  // key: first page's tokens
  int64_t refs = 0;
  uint64_t last_use = 0;
};

namespace {
std::vector<int32_t> page_key(std::span<const int32_t> ids, size_t page, int page_size) {
  const auto* begin = ids.data() + page * static_cast<size_t>(page_size);
  return std::vector<int32_t>(begin, begin + page_size);
}

// Pages of `child`'s edge that equal ids' pages from `page` on (at least 1: its key matched),
// within the first `total_pages` pages of ids.
size_t pages_in_common(const RadixCache::Node& child, std::span<const int32_t> ids, size_t page,
                       size_t total_pages, int page_size) {
  const auto ps = static_cast<size_t>(page_size);
  const size_t child_pages = child.pages.size();
  size_t same = 1;  // the key matched the first page
  while (same < child_pages && page + same < total_pages &&
         std::equal(child.tokens.begin() + static_cast<ptrdiff_t>(same * ps),
                    child.tokens.begin() + static_cast<ptrdiff_t>((same + 1) * ps),
                    ids.begin() + static_cast<ptrdiff_t>((page + same) * ps)))
    ++same;
  return same;
}
}  // namespace

RadixCache::RadixCache(KvPool& pool)
    : pool_(&pool), page_size_(pool.page_size()), root_(std::make_unique<Node>()) {
  root_->refs = 1;  // the root is never evicted
}

RadixCache::~RadixCache() {
  // Return every page; nodes are destroyed with root_.
  std::vector<Node*> stack{root_.get()};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    if (!n->pages.empty()) pool_->free(n->pages);
    for (auto& [key, child] : n->children) stack.push_back(child.get());
  }
}

void RadixCache::touch(Node* node) {
  ++clock_;
  for (Node* n = node; n != nullptr; n = n->parent) n->last_use = clock_;
}

RadixCache::Node* RadixCache::split(Node* node, size_t n_pages) {
  // node = [head | tail] becomes mid(head) -> node(tail). Locks that passed through node pass
  // through mid as well, so mid inherits node's count and the evictable total is unchanged.
  Node* parent = node->parent;
  auto mid = std::make_unique<Node>();
  mid->parent = parent;
  mid->refs = node->refs;
  mid->last_use = node->last_use;
  const size_t n_tokens = n_pages * static_cast<size_t>(page_size_);
  mid->tokens.assign(node->tokens.begin(), node->tokens.begin() + static_cast<ptrdiff_t>(n_tokens));
  mid->pages.assign(node->pages.begin(), node->pages.begin() + static_cast<ptrdiff_t>(n_pages));
  node->tokens.erase(node->tokens.begin(), node->tokens.begin() + static_cast<ptrdiff_t>(n_tokens));
  node->pages.erase(node->pages.begin(), node->pages.begin() + static_cast<ptrdiff_t>(n_pages));

  auto key = page_key(mid->tokens, 0, page_size_);
  auto it = parent->children.find(key);
  std::unique_ptr<Node> owned = std::move(it->second);  // == node
  node->parent = mid.get();
  mid->children.emplace(page_key(node->tokens, 0, page_size_), std::move(owned));
  Node* mid_raw = mid.get();
  it->second = std::move(mid);
  ++node_count_;
  return mid_raw;
}

int64_t RadixCache::cached_prefix_tokens(std::span<const int32_t> ids) const {
  const Node* node = root_.get();
  const size_t total_pages = ids.size() / static_cast<size_t>(page_size_);
  size_t page = 0;
  while (page < total_pages) {
    auto it = node->children.find(page_key(ids, page, page_size_));
    if (it == node->children.end()) break;
    const Node* child = it->second.get();
    const size_t same = pages_in_common(*child, ids, page, total_pages, page_size_);
    page += same;
    if (same < child->pages.size()) break;  // the match ends inside this edge
    node = child;
  }
  return static_cast<int64_t>(page) * page_size_;
}

RadixCache::Match RadixCache::match_prefix(std::span<const int32_t> ids) {
  Match m;
  Node* node = root_.get();
  const size_t total_pages = ids.size() / static_cast<size_t>(page_size_);
  size_t page = 0;
  while (page < total_pages) {
    auto it = node->children.find(page_key(ids, page, page_size_));
    if (it == node->children.end()) break;
    Node* child = it->second.get();
    const size_t same = pages_in_common(*child, ids, page, total_pages, page_size_);
    if (same < child->pages.size()) child = split(child, same);
    m.pages.insert(m.pages.end(), child->pages.begin(), child->pages.end());
    page += same;
    node = child;
  }
  m.n_tokens = static_cast<int64_t>(page) * page_size_;
  m.node = node == root_.get() ? nullptr : node;
  touch(node);
  return m;
}

RadixCache::Node* RadixCache::insert(std::span<const int32_t> ids, std::span<int32_t> pages) {
  const size_t n_pages = pages.size();
  KILN_CHECK(ids.size() >= n_pages * static_cast<size_t>(page_size_),
             "radix cache: {} tokens cannot fill {} pages of {}", ids.size(), n_pages, page_size_);
  Node* node = root_.get();
  size_t page = 0;
  while (page < n_pages) {
    auto it = node->children.find(page_key(ids, page, page_size_));
    if (it == node->children.end()) {
      // New leaf with the rest: its pages now belong to the cache.
      auto leaf = std::make_unique<Node>();
      leaf->parent = node;
      leaf->tokens.assign(ids.begin() + static_cast<ptrdiff_t>(page * page_size_),
                          ids.begin() + static_cast<ptrdiff_t>(n_pages * page_size_));
      leaf->pages.assign(pages.begin() + static_cast<ptrdiff_t>(page), pages.end());
      const auto added = static_cast<int64_t>(leaf->pages.size());
      cached_pages_ += added;
      evictable_pages_ += added;  // unpinned until the caller locks it
      ++node_count_;
      Node* raw = leaf.get();
      node->children.emplace(page_key(leaf->tokens, 0, page_size_), std::move(leaf));
      node = raw;
      page = n_pages;
      break;
    }
    Node* child = it->second.get();
    const size_t child_pages = child->pages.size();
    size_t same = 1;
    while (same < child_pages && page + same < n_pages &&
           std::equal(child->tokens.begin() + static_cast<ptrdiff_t>(same * page_size_),
                      child->tokens.begin() + static_cast<ptrdiff_t>((same + 1) * page_size_),
                      ids.begin() + static_cast<ptrdiff_t>((page + same) * page_size_)))
      ++same;
    if (same < child_pages) child = split(child, same);
    // Already cached: the cache's page wins, the caller's duplicate goes back to the pool.
    for (size_t i = 0; i < same; ++i) {
      int32_t& mine = pages[page + i];
      if (mine != child->pages[i]) {
        pool_->free_page(mine);
        mine = child->pages[i];
      }
    }
    page += same;
    node = child;
  }
  touch(node);
  return node;
}

void RadixCache::lock(Node* node) {
  for (Node* n = node; n != nullptr && n != root_.get(); n = n->parent) {
    if (n->refs++ == 0) evictable_pages_ -= static_cast<int64_t>(n->pages.size());
  }
}

void RadixCache::unlock(Node* node) {
  for (Node* n = node; n != nullptr && n != root_.get(); n = n->parent) {
    KILN_CHECK(n->refs > 0, "radix cache: unlock of an unlocked node");
    if (--n->refs == 0) evictable_pages_ += static_cast<int64_t>(n->pages.size());
  }
}

int64_t RadixCache::evict(int64_t n_pages) {
  if (n_pages <= 0) return 0;
  auto older = [](const Node* a, const Node* b) { return a->last_use > b->last_use; };
  std::priority_queue<Node*, std::vector<Node*>, decltype(older)> leaves(older);
  std::vector<Node*> stack{root_.get()};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    if (n != root_.get() && n->children.empty() && n->refs == 0) leaves.push(n);
    for (auto& [key, child] : n->children) stack.push_back(child.get());
  }
  int64_t freed = 0;
  while (freed < n_pages && !leaves.empty()) {
    Node* leaf = leaves.top();
    leaves.pop();
    pool_->free(leaf->pages);
    const auto count = static_cast<int64_t>(leaf->pages.size());
    freed += count;
    cached_pages_ -= count;
    evictable_pages_ -= count;
    --node_count_;
    Node* parent = leaf->parent;
    parent->children.erase(page_key(leaf->tokens, 0, page_size_));  // destroys leaf
    if (parent != root_.get() && parent->children.empty() && parent->refs == 0) leaves.push(parent);
  }
  return freed;
}

void RadixCache::check_invariants() const {
  int64_t cached = 0, evictable = 0, nodes = 0;
  std::vector<const Node*> stack{root_.get()};
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (n != root_.get()) {
      ++nodes;
      KILN_CHECK(!n->pages.empty(), "radix cache: empty edge");
      KILN_CHECK(n->tokens.size() == n->pages.size() * static_cast<size_t>(page_size_),
                 "radix cache: edge of {} tokens for {} pages", n->tokens.size(), n->pages.size());
      KILN_CHECK(n->refs >= 0 && (n->parent == root_.get() || n->refs <= n->parent->refs),
                 "radix cache: a node has more locks than its parent");
      cached += static_cast<int64_t>(n->pages.size());
      if (n->refs == 0) evictable += static_cast<int64_t>(n->pages.size());
    }
    for (const auto& [key, child] : n->children) {
      KILN_CHECK(child->parent == n, "radix cache: broken parent link");
      KILN_CHECK(
          key == std::vector<int32_t>(child->tokens.begin(), child->tokens.begin() + page_size_),
          "radix cache: child key differs from its first page");
      stack.push_back(child.get());
    }
  }
  KILN_CHECK(cached == cached_pages_ && evictable == evictable_pages_ && nodes == node_count_,
             "radix cache: counters drifted (cached {} vs {}, evictable {} vs {}, nodes {} vs {})",
             cached, cached_pages_, evictable, evictable_pages_, nodes, node_count_);
}

}  // namespace kiln::engine
