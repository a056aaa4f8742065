#include "kiln/engine/grammar/grammar_suffix_masks.h"

#include <cstring>

#include "kiln/base/lru_cache.h"
#include "kiln/engine/grammar/grammar_walk_memo.h"

namespace kiln::engine {

namespace {

LruCache<GrammarSuffixClass>& suffix_cache() {
  static LruCache<GrammarSuffixClass> cache(SIZE_MAX, size_t{256} << 20);
  return cache;
}

std::string key_of(const TokenTrie& trie, const Grammar& grammar, std::span<const uint32_t> suffix,
                   bool whole, int64_t vocab) {
  std::string key(2 * sizeof(uint64_t) + sizeof(uintptr_t) + 1, '\0');
  const uint64_t serial = trie.serial();
  const auto address = reinterpret_cast<uintptr_t>(&grammar);
  std::memcpy(key.data(), &serial, sizeof serial);
  std::memcpy(key.data() + sizeof serial, &address, sizeof address);
  std::memcpy(key.data() + sizeof serial + sizeof address, &vocab, sizeof vocab);
  key.back() = whole ? 1 : 0;
  key.append(reinterpret_cast<const char*>(suffix.data()), suffix.size() * sizeof(uint32_t));
  return key;
}

GrammarSuffixClass classify(const TokenTrie& trie, const Grammar& g,
                            std::span<const uint32_t> suffix, bool whole, int64_t vocab) {
  GrammarSuffixClass out;
  out.accepted.assign(static_cast<size_t>((vocab + 63) / 64), 0);
  GrammarState start;
  start.data.push_back(static_cast<uint32_t>(suffix.size()));
  start.data.insert(start.data.end(), suffix.begin(), suffix.end());
  thread_local WalkMemo memo;
  thread_local std::vector<int32_t> at;
  thread_local std::vector<uint8_t> popped;  // popped[d]: some state on the path finished
  thread_local std::string path;
  memo.reset(start);
  at.assign(trie.max_depth() + 1, 0);
  popped.assign(trie.max_depth() + 1, 0);
  path.assign(trie.max_depth(), '\0');
  for (size_t i = 1; i < trie.size();) {
    const uint32_t d = trie.depth(i);
    path[d - 1] = static_cast<char>(trie.byte(i));
    const int32_t s = memo.step(g, at[d - 1], trie.byte(i));
    if (s < 0) {
      if (!whole && popped[d - 1])
        out.open.push_back({static_cast<uint32_t>(i), path.substr(0, d - 1)});
      i = trie.subtree_end(i);
      continue;
    }
    at[d] = s;
    popped[d] = popped[d - 1] || memo.complete(s);
    for (const int32_t* id = trie.tokens_begin(i); id != trie.tokens_end(i); ++id) {
      if (*id >= 0 && *id < vocab)
        out.accepted[static_cast<size_t>(*id) >> 6] |= uint64_t{1} << (*id & 63);
    }
    ++i;
  }
  return out;
}

}  // namespace

size_t GrammarSuffixClass::bytes() const {
  size_t n = accepted.size() * sizeof(uint64_t) + open.size() * sizeof(Open);
  for (const Open& o : open) n += o.path.size();
  return n;
}

std::shared_ptr<const GrammarSuffixClass> cached_grammar_suffix_class(
    const TokenTrie& trie, const Grammar& grammar, std::span<const uint32_t> suffix, bool whole,
    int64_t vocab) {
  return suffix_cache().find(key_of(trie, grammar, suffix, whole, vocab));
}

std::shared_ptr<const GrammarSuffixClass> grammar_suffix_class(
    const TokenTrie& trie, const std::shared_ptr<const Grammar>& grammar,
    std::span<const uint32_t> suffix, bool whole, int64_t vocab) {
  const std::string key = key_of(trie, *grammar, suffix, whole, vocab);
  if (auto hit = suffix_cache().find(key)) return hit;
  auto cls = std::make_shared<GrammarSuffixClass>(classify(trie, *grammar, suffix, whole, vocab));
  cls->grammar = grammar;
  const size_t bytes = cls->bytes();
  return suffix_cache().insert(key, std::move(cls), bytes);
}

}  // namespace kiln::engine
