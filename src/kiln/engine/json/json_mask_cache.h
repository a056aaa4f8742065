// Token masks of a constraint (a JSON schema or a grammar), remembered per matcher state. The mask
// at a state is a pure function of the compiled schema, the state and the end ids (the vocabulary's
// trie is fixed for a cache), and the states generation passes through recur: inside a patterned
// string such as
// `^[^<>]*$` every step starts from the same state, and requests that send the same schema
// share one compiled copy (JsonSchemaCache), so they share masks too. A walk of a 262,144-token
// vocabulary there takes ~12 ms; a cached mask is a lookup.
//
// Thread-safe: masks are computed outside the lock, so several threads can fill it at once.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/base/lru_cache.h"
#include "kiln/engine/json/constraint_matcher.h"
#include "kiln/engine/json/token_trie.h"

namespace kiln::engine {

// Which tokens of a vocabulary may come next, one bit each.
class TokenMask {
 public:
  TokenMask() = default;
  // From a byte per token (json_allowed_tokens' output).
  explicit TokenMask(std::span<const uint8_t> allowed);
  bool allows(int64_t id) const {
    return id >= 0 && id < size_ && (words_[static_cast<size_t>(id >> 6)] >> (id & 63) & 1) != 0;
  }
  int64_t size() const { return size_; }
  int64_t allowed_count() const { return allowed_; }
  // Sets every disallowed token's logit to -infinity (logits.size() may exceed size(): the
  // ids past it are disallowed).
  void apply(std::span<float> logits) const;
  size_t bytes() const { return words_.size() * sizeof(uint64_t); }

 private:
  std::vector<uint64_t> words_;
  int64_t size_ = 0;
  int64_t allowed_ = 0;
};

// The mask json_allowed_tokens computes, as a TokenMask over `vocab` ids.
TokenMask compute_token_mask(const TokenTrie& trie, const ConstraintMatcher& matcher,
                             std::span<const int32_t> end_ids, int64_t vocab);

class JsonMaskCache {
 public:
  // Least recently used masks are dropped once the masks held exceed max_bytes.
  JsonMaskCache(const TokenTrie& trie, int64_t vocab, size_t max_bytes);

  // The mask at `matcher`'s state: from the cache, or computed and kept.
  std::shared_ptr<const TokenMask> get(const ConstraintMatcher& matcher,
                                       std::span<const int32_t> end_ids);

  using Stats = LruCache<TokenMask>::Stats;
  Stats stats() const { return cache_.stats(); }

 private:
  // A cached mask keeps the schema or grammar its key names alive: the key holds its address,
  // which no other one can take while the entry exists.
  struct Entry : TokenMask {
    std::shared_ptr<const void> owner;
  };
  const TokenTrie& trie_;
  const int64_t vocab_;
  LruCache<TokenMask> cache_;
};

// The cache key of a matcher state: the kind, the schema's or grammar's identity, the state
// (a schema's frames and whitespace run; a grammar's stacks) and the end ids (they decide what
// completes the value).
std::string json_mask_key(const ConstraintMatcher& matcher, std::span<const int32_t> end_ids);

}  // namespace kiln::engine
