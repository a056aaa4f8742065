#include "kiln/engine/json/literal_trie.h"

#include <algorithm>

namespace kiln::engine {

void LiteralTrie::add(const std::string& s, int32_t index) {
  const uint64_t bit = uint64_t{1} << std::min<int32_t>(index, 63);
  uint32_t at = 0;
  nodes[at].subtree |= bit;
  for (char c : s) {
    const auto b = static_cast<uint8_t>(c);
    const int64_t next = child(at, b);
    if (next >= 0) {
      at = static_cast<uint32_t>(next);
    } else {
      nodes.emplace_back();
      const auto created = static_cast<uint32_t>(nodes.size() - 1);
      nodes[at].children.emplace_back(b, created);
      at = created;
    }
    nodes[at].subtree |= bit;
  }
  if (nodes[at].terminal < 0) nodes[at].terminal = index;  // a duplicate keeps the first
}

int64_t LiteralTrie::child(uint32_t node, uint8_t byte) const {
  for (const auto& [b, n] : nodes[node].children) {
    if (b == byte) return n;
  }
  return -1;
}

}  // namespace kiln::engine
