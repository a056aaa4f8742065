// Byte strings as a trie, for the JSON matcher: enum/const values and object keys are matched
// byte by byte along it.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln::engine {

// Byte strings as a trie; each string ends at a terminal node carrying its index. Used for
// enum/const values (their compact serializations) and for object keys (quoted).
struct LiteralTrie {
  struct Node {
    std::vector<std::pair<uint8_t, uint32_t>> children;  // (byte, node), few per node
    int32_t terminal = -1;                               // index of the string ending here
    uint64_t subtree = 0;  // bit min(i, 63) for every string i ending in this subtree
  };
  std::vector<Node> nodes{Node{}};  // node 0 is the root

  void add(const std::string& s, int32_t index);
  int64_t child(uint32_t node, uint8_t byte) const;  // -1 when there is none
};

}  // namespace kiln::engine
