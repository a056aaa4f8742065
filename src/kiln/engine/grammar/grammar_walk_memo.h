// The states one trie walk meets under a grammar, numbered, and the transitions between them
// (grammar_token_mask.h, grammar_suffix_masks.h): the state after (state, byte) is computed once
// per walk, so a subtree below a state the walk has seen before costs a table lookup a node.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "kiln/engine/grammar/grammar_matcher.h"

namespace kiln::engine {

struct GrammarStacksHash {
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
    complete_.clear();
    intern(start.data);
  }
  // Whether state `id` holds an empty stack (a finished parse).
  bool complete(int32_t id) const { return complete_[static_cast<size_t>(id)] != 0; }
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
      complete_.push_back(grammar_complete(GrammarState{data}) ? 1 : 0);
      if (states_.size() <= kTableStates) table_.resize(states_.size() * 256, kUnknown);
    }
    return it->second;
  }

  std::vector<std::vector<uint32_t>> states_;
  std::unordered_map<std::vector<uint32_t>, int32_t, GrammarStacksHash> ids_;
  std::vector<int32_t> table_;
  std::vector<uint8_t> complete_;
  std::unordered_map<uint64_t, int32_t> overflow_;
  GrammarState scratch_;
};

}  // namespace kiln::engine
