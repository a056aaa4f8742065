#include "kiln/engine/json/json_token_mask.h"

#include <algorithm>
#include <vector>

namespace kiln::engine {

int64_t json_allowed_tokens(const TokenTrie& trie, const JsonMatcher& matcher,
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
  const JsonSchema& schema = matcher.schema();
  const JsonMatchState& start = matcher.state();
  // Inside a string, plain-content tokens are accepted without running the automaton
  // (TokenTrie::string_class); only the rest of the trie is walked.
  const bool in_string = json_in_plain_string(schema, start);
  // at[d]: the state after the path to the latest node at depth d; rooms[d] holds it when it
  // differs from its parent's. Reused across steps: no allocation once warm.
  thread_local std::vector<JsonMatchState> rooms;
  thread_local std::vector<const JsonMatchState*> at;
  rooms.resize(trie.max_depth() + 1);
  at.assign(trie.max_depth() + 1, nullptr);
  at[0] = &start;
  auto allow_node = [&](size_t node) {
    for (const int32_t* id = trie.tokens_begin(node); id != trie.tokens_end(node); ++id) allow(*id);
  };
  // Walks nodes [first, last) in preorder; at[depth(first) - 1] must hold the state there.
  auto walk = [&](size_t first, size_t last) {
    for (size_t i = first; i < last;) {
      const uint32_t d = trie.depth(i);
      const JsonMatchState* parent = at[d - 1];
      const uint8_t b = trie.byte(i);
      const JsonMatchState* s = nullptr;
      if (json_byte_keeps_state(schema, *parent, b)) {
        s = parent;
      } else {
        rooms[d] = *parent;
        if (json_feed(schema, rooms[d], b)) s = &rooms[d];
      }
      if (s == nullptr) {  // refused: so is every token below
        i = trie.subtree_end(i);
        continue;
      }
      at[d] = s;
      allow_node(i);
      ++i;
    }
  };
  if (in_string) {
    // Plain content: all allowed, taken from the trie's precomputed mask. Below a plain node
    // that ends on a character boundary the state is `start` again, so each frontier subtree
    // is walked from there.
    const std::vector<uint8_t>& plain = trie.plain_mask();
    const size_t n = std::min(plain.size(), allowed.size());
    std::copy(plain.begin(), plain.begin() + static_cast<std::ptrdiff_t>(n), allowed.begin());
    count = trie.plain_count();
    for (int32_t id = vocab; id < static_cast<int64_t>(plain.size()); ++id) count -= plain[id];
    // A maxLength: the plain tokens longer than the room left are taken out again, and each
    // frontier subtree starts from the state after its plain prefix's characters.
    const uint32_t room = json_string_room(schema, start);
    for (uint32_t c = room == UINT32_MAX ? UINT32_MAX : room + 1; c <= trie.max_plain_chars();
         ++c) {
      for (int32_t id : trie.plain_tokens_with_chars(c)) {
        if (id < vocab && allowed[static_cast<size_t>(id)]) {
          allowed[static_cast<size_t>(id)] = 0;
          --count;
        }
      }
    }
    JsonMatchState shifted;
    const std::vector<uint32_t>& frontier = trie.string_frontier();
    for (size_t i = 0; i < frontier.size(); ++i) {
      const uint32_t f = frontier[i], before = trie.frontier_chars(i);
      const JsonMatchState* from = &start;
      if (room != UINT32_MAX && before > 0) {
        if (before > room) continue;  // its plain prefix alone is too long
        shifted = start;
        json_add_string_chars(schema, shifted, before);
        from = &shifted;
      }
      at[trie.depth(f) - 1] = from;
      walk(f, trie.subtree_end(f));
    }
  } else {
    walk(1, trie.size());
  }
  if (matcher.complete()) {
    for (int32_t id : end_ids) allow(id);
  }
  return count;
}

}  // namespace kiln::engine
