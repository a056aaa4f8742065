#include "kiln/engine/json_token_mask.h"

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
  // One state per trie depth, reused across steps (no allocation once warm).
  thread_local std::vector<JsonMatchState> rooms;
  thread_local std::vector<const JsonMatchState*> at;
  trie.walk(
      matcher.state(),
      [&](const JsonMatchState& parent, JsonMatchState& room, uint8_t b) -> const JsonMatchState* {
        if (json_byte_keeps_state(parent, b)) return &parent;
        room = parent;
        return json_feed(schema, room, b) ? &room : nullptr;
      },
      [&](size_t node) {
        for (const int32_t* id = trie.tokens_begin(node); id != trie.tokens_end(node); ++id) {
          allow(*id);
        }
      },
      rooms, at);
  if (matcher.complete()) {
    for (int32_t id : end_ids) allow(id);
  }
  return count;
}

}  // namespace kiln::engine
