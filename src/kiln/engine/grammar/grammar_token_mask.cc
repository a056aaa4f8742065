#include "kiln/engine/grammar/grammar_token_mask.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

namespace kiln::engine {

namespace {

struct StateHash {
  size_t operator()(const std::vector<uint32_t>& v) const {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (uint32_t x : v) h = (h ^ x) * 0x100000001b3ULL;
    return static_cast<size_t>(h);
  }
};

// The states one walk has met, numbered, and the transitions between them: a flat table of 256
// entries for each of the first kTableStates states (most walks meet a few dozen), a hash map
// past them, so a pathological grammar costs memory in proportion to the trie, not 1 KiB a state.
class WalkMemo {
 public:
  static constexpr size_t kTableStates = 4096;
  static constexpr int32_t kUnknown = -2;

  void reset(const GrammarState& start) {
    states_.clear();
    ids_.clear();
    table_.clear();
    overflow_.clear();
    intern(start.data);
  }
  // The state after `byte` from state `from`, or -1 when refused.
  int32_t step(const Grammar& g, int32_t from, uint8_t byte) {
    int32_t* slot = nullptr;
    if (static_cast<size_t>(from) < kTableStates) {
      slot = &table_[static_cast<size_t>(from) * 256 + byte];
    } else {
      slot =
          &overflow_.try_emplace(static_cast<uint64_t>(from) << 8 | byte, kUnknown).first->second;
    }
    if (*slot != kUnknown) return *slot;
    scratch_.data = states_[static_cast<size_t>(from)];
    const int32_t to = grammar_feed(g, scratch_, byte) ? intern(scratch_.data) : -1;
    // Re-found: interning may have grown the table under the pointer.
    if (static_cast<size_t>(from) < kTableStates) {
      table_[static_cast<size_t>(from) * 256 + byte] = to;
    } else {
      overflow_[static_cast<uint64_t>(from) << 8 | byte] = to;
    }
    return to;
  }

 private:
  int32_t intern(const std::vector<uint32_t>& data) {
    const auto [it, added] = ids_.try_emplace(data, static_cast<int32_t>(states_.size()));
    if (added) {
      states_.push_back(data);
      if (states_.size() <= kTableStates) table_.resize(states_.size() * 256, kUnknown);
    }
    return it->second;
  }

  std::vector<std::vector<uint32_t>> states_;
  std::unordered_map<std::vector<uint32_t>, int32_t, StateHash> ids_;
  std::vector<int32_t> table_;
  std::unordered_map<uint64_t, int32_t> overflow_;
  GrammarState scratch_;
};

}  // namespace

int64_t grammar_allowed_tokens(const TokenTrie& trie, const GrammarMatcher& matcher,
                               std::span<const int32_t> end_ids, std::span<uint8_t> allowed) {
  std::fill(allowed.begin(), allowed.end(), uint8_t{0});
  const auto vocab = static_cast<int64_t>(allowed.size());
  int64_t count = 0;
  auto allow = [&](int32_t id) {
    if (id >= 0 && id < vocab && !allowed[static_cast<size_t>(id)]) {
      allowed[static_cast<size_t>(id)] = 1;
      ++count;
    }
  };
  const Grammar& g = matcher.grammar();
  thread_local WalkMemo memo;
  thread_local std::vector<int32_t> at;  // at[d]: the state after the latest node at depth d
  memo.reset(matcher.state());
  at.assign(trie.max_depth() + 1, 0);
  for (size_t i = 1; i < trie.size();) {
    const uint32_t d = trie.depth(i);
    const int32_t s = memo.step(g, at[d - 1], trie.byte(i));
    if (s < 0) {  // refused: so is every token below
      i = trie.subtree_end(i);
      continue;
    }
    at[d] = s;
    for (const int32_t* id = trie.tokens_begin(i); id != trie.tokens_end(i); ++id) allow(*id);
    ++i;
  }
  if (matcher.complete()) {
    for (int32_t id : end_ids) allow(id);
  }
  return count;
}

}  // namespace kiln::engine
