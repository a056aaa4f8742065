#include "kiln/engine/json/json_min_bytes.h"

#include <algorithm>
#include <deque>
#include <vector>

namespace kiln::engine {
namespace {

constexpr uint64_t kHuge = UINT64_MAX / 4;

uint64_t add(uint64_t a, uint64_t b) { return std::min(kHuge, a + b); }
uint64_t mul(uint64_t a, uint64_t b) {
  return a == 0 || b <= kHuge / a ? std::min(kHuge, a * b) : kHuge;
}

// Depth of each string's terminal in a literal trie (its length in bytes), by string index.
std::vector<uint64_t> literal_lengths(const LiteralTrie& trie) {
  std::vector<uint64_t> out;
  std::vector<std::pair<uint32_t, uint64_t>> stack = {{0, 0}};
  while (!stack.empty()) {
    const auto [node, depth] = stack.back();
    stack.pop_back();
    const LiteralTrie::Node& n = trie.nodes[node];
    if (n.terminal >= 0) {
      const auto i = static_cast<size_t>(n.terminal);
      if (out.size() <= i) out.resize(i + 1, kHuge);
      out[i] = std::min(out[i], depth);
    }
    for (const auto& [byte, child] : n.children) stack.emplace_back(child, depth + 1);
  }
  return out;
}

// Characters on the shortest path from the start to an accepting state (breadth first).
uint64_t shortest_string(const StringAutomaton& a) {
  std::vector<uint64_t> dist(a.size(), kHuge);
  std::deque<uint32_t> queue = {StringAutomaton::start()};
  dist[StringAutomaton::start()] = 0;
  while (!queue.empty()) {
    const uint32_t s = queue.front();
    queue.pop_front();
    if (a.accepting(s)) return dist[s];
    for (const StringAutomaton::Edge& e : a.edges(s)) {
      if (dist[e.to] == kHuge) {
        dist[e.to] = dist[s] + 1;
        queue.push_back(e.to);
      }
    }
  }
  return kHuge;
}

}  // namespace

uint64_t json_min_bytes(const JsonSchema& schema) {
  const size_t n = schema.node_count();
  // Per node, a lower bound that only grows: every round computes each node's shortest form
  // from the previous round's bounds, which (starting at 0) stay below the true lengths; a
  // few rounds settle any real schema, and recursion with no way out keeps growing.
  std::vector<uint64_t> low(n, 0);
  std::vector<std::vector<uint64_t>> literal_len(schema.trie_count());
  for (size_t i = 0; i < schema.trie_count(); ++i) {
    literal_len[i] = literal_lengths(schema.trie(static_cast<int32_t>(i)));
  }
  std::vector<uint64_t> string_len(schema.automaton_count());
  for (size_t i = 0; i < schema.automaton_count(); ++i) {
    string_len[i] = shortest_string(schema.automaton(static_cast<int32_t>(i)));
  }
  auto node_low = [&](const SchemaNode& node) -> uint64_t {
    if (node.literals >= 0) {
      const auto& lens = literal_len[static_cast<size_t>(node.literals)];
      return lens.empty() ? kHuge : *std::min_element(lens.begin(), lens.end());
    }
    if (!node.any_of.empty()) {
      uint64_t best = kHuge;
      for (uint32_t b : node.any_of) best = std::min(best, low[b]);
      return best;
    }
    uint64_t best = kHuge;
    if (node.types & (json_type::kNumber | json_type::kInteger)) best = std::min<uint64_t>(best, 1);
    if (node.types & (json_type::kBoolean | json_type::kNull)) best = std::min<uint64_t>(best, 4);
    if (node.types & json_type::kString) {
      const uint64_t chars = node.automaton >= 0 ? string_len[static_cast<size_t>(node.automaton)]
                                                 : uint64_t{node.min_length};
      best = std::min(best, add(2, chars));
    }
    if (node.types & json_type::kArray) {
      const uint64_t item = node.items >= 0 ? low[static_cast<size_t>(node.items)] : 1;
      const uint64_t k = node.min_items;
      best = std::min(best, k == 0 ? 2 : add(add(2, mul(k, item)), k - 1));
    }
    if (node.types & json_type::kObject) {
      uint64_t total = 2;
      if (node.has_properties && node.key_trie >= 0) {
        const auto& keys = literal_len[static_cast<size_t>(node.key_trie)];
        uint64_t members = 0;
        for (size_t p = 0; p < node.property_nodes.size() && p < 64; ++p) {
          if (!(node.required >> p & 1) || static_cast<int32_t>(p) == node.tagged) continue;
          const uint64_t key = p < keys.size() ? keys[p] : 2;
          total = add(total, add(add(key, 1), low[node.property_nodes[p]]));
          ++members;
        }
        if (members > 1) total = add(total, members - 1);
      }
      best = std::min(best, total);
    }
    return best;
  };
  for (int round = 0; round < 64; ++round) {
    bool changed = false;
    for (size_t i = 0; i < n; ++i) {
      const uint64_t v = std::max(low[i], node_low(schema.node(static_cast<uint32_t>(i))));
      if (v != low[i]) {
        low[i] = v;
        changed = true;
      }
    }
    if (!changed) break;
  }
  return low[schema.root()];
}

}  // namespace kiln::engine
