#include "kiln/engine/json/json_mask_cache.h"

#include <bit>
#include <cstring>
#include <limits>

#include "kiln/engine/grammar/grammar_token_mask.h"
#include "kiln/engine/json/json_token_mask.h"

namespace kiln::engine {

TokenMask::TokenMask(std::span<const uint8_t> allowed)
    : words_((allowed.size() + 63) / 64, 0), size_(static_cast<int64_t>(allowed.size())) {
  for (size_t i = 0; i < allowed.size(); ++i) {
    if (allowed[i]) words_[i >> 6] |= uint64_t{1} << (i & 63);
  }
  for (uint64_t w : words_) allowed_ += std::popcount(w);
}

void TokenMask::apply(std::span<float> logits) const {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const size_t n = logits.size();
  for (size_t w = 0; w * 64 < n; ++w) {
    const uint64_t bits = w < words_.size() ? words_[w] : 0;
    if (bits == ~uint64_t{0}) continue;  // all 64 allowed: the common case inside free text
    const size_t end = std::min(n, w * 64 + 64);
    for (size_t i = w * 64; i < end; ++i) {
      if ((bits >> (i & 63) & 1) == 0) logits[i] = kNegInf;
    }
  }
}

TokenMask compute_token_mask(const TokenTrie& trie, const ConstraintMatcher& matcher,
                             std::span<const int32_t> end_ids, int64_t vocab) {
  // The byte-per-token scratch is reused across calls on each thread.
  thread_local std::vector<uint8_t> allowed;
  allowed.resize(static_cast<size_t>(vocab));
  if (const JsonMatcher* json = matcher.json()) {
    json_allowed_tokens(trie, *json, end_ids, allowed);
  } else {
    grammar_allowed_tokens(trie, *matcher.grammar(), end_ids, allowed);
  }
  return TokenMask(allowed);
}

namespace {

template <typename T>
void put(std::string& key, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  key.append(bytes, sizeof(T));
}

}  // namespace

namespace {

std::string grammar_mask_key(const GrammarMatcher& matcher, std::span<const int32_t> end_ids) {
  const std::vector<uint32_t>& data = matcher.state().data;
  std::string key;
  key.reserve(16 + (data.size() + end_ids.size()) * 4);
  put(key, uint8_t{'G'});
  put(key, reinterpret_cast<uintptr_t>(&matcher.grammar()));
  put(key, static_cast<uint32_t>(end_ids.size()));
  for (int32_t id : end_ids) put(key, id);
  key.append(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(uint32_t));
  return key;
}

}  // namespace

std::string json_mask_key(const ConstraintMatcher& constraint, std::span<const int32_t> end_ids) {
  if (const GrammarMatcher* g = constraint.grammar()) return grammar_mask_key(*g, end_ids);
  const JsonMatcher& matcher = *constraint.json();
  const JsonMatchState& s = matcher.state();
  std::string key;
  key.reserve(25 + s.stack.size() * 20 + end_ids.size() * 4);
  put(key, uint8_t{'J'});
  put(key, reinterpret_cast<uintptr_t>(&matcher.schema()));
  put(key, s.ws_run);
  put(key, static_cast<uint8_t>(s.leading_space));
  put(key, static_cast<uint32_t>(end_ids.size()));
  for (int32_t id : end_ids) put(key, id);
  // Field by field: the frame's padding bytes are not part of the state.
  for (const JsonFrame& f : s.stack) {
    put(key, f.kind);
    put(key, f.phase);
    put(key, f.aux);
    put(key, f.flags);
    put(key, f.node);
    put(key, f.pos);
    put(key, f.used);
  }
  return key;
}

JsonMaskCache::JsonMaskCache(const TokenTrie& trie, int64_t vocab, size_t max_bytes)
    : trie_(trie), vocab_(vocab), cache_(SIZE_MAX, max_bytes) {}

std::shared_ptr<const TokenMask> JsonMaskCache::get(const ConstraintMatcher& matcher,
                                                    std::span<const int32_t> end_ids) {
  const std::string key = json_mask_key(matcher, end_ids);
  if (std::shared_ptr<const TokenMask> hit = cache_.find(key)) return hit;
  auto entry = std::make_shared<Entry>();
  static_cast<TokenMask&>(*entry) = compute_token_mask(trie_, matcher, end_ids, vocab_);
  if (const JsonMatcher* json = matcher.json()) {
    entry->owner = json->schema_ptr();
  } else {
    entry->owner = matcher.grammar()->grammar_ptr();
  }
  const size_t bytes = entry->bytes();
  return cache_.insert(key, std::move(entry), bytes);
}

}  // namespace kiln::engine
