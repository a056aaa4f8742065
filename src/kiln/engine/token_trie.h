// The vocabulary as a byte trie, built once per tokenizer, for constrained decoding: a
// constraint that accepts bytes one at a time walks the trie once per step and prunes a whole
// subtree at the first byte it refuses, instead of testing 262,144 tokens one by one (most
// share their first bytes).
//
// Nodes are stored in preorder with their depth and the end of their subtree, so the walk is a
// flat loop: "refused" jumps to the subtree's end, and the state at a node is derived from the
// state at its parent, which is the latest node visited one level up.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln::engine {

class TokenTrie {
 public:
  // (token id, the bytes it adds to the text). Tokens with no bytes are left out.
  explicit TokenTrie(std::vector<std::pair<int32_t, std::string>> tokens);

  size_t size() const { return byte_.size(); }  // nodes, the root (index 0) included
  uint8_t byte(size_t node) const { return byte_[node]; }
  uint32_t depth(size_t node) const { return depth_[node]; }
  uint32_t subtree_end(size_t node) const { return end_[node]; }
  // Token ids whose bytes end at `node`.
  const int32_t* tokens_begin(size_t node) const { return ids_.data() + first_id_[node]; }
  const int32_t* tokens_end(size_t node) const { return ids_.data() + first_id_[node + 1]; }
  uint32_t max_depth() const { return max_depth_; }
  size_t token_count() const { return ids_.size(); }

  // Calls visit(node) for every node whose path `step` accepts, in preorder.
  // step(parent, room, byte) returns the state after `byte`: &parent when the byte leaves it
  // unchanged (no copy: the common case inside a string), &room after writing a new state
  // there, or nullptr to prune the subtree.
  template <typename State, typename Step, typename Visit>
  void walk(const State& start, Step step, Visit visit, std::vector<State>& rooms,
            std::vector<const State*>& at) const {
    rooms.resize(max_depth_ + 1);
    at.assign(max_depth_ + 1, nullptr);
    at[0] = &start;
    for (size_t i = 1; i < byte_.size();) {
      const uint32_t d = depth_[i];
      const State* s = step(*at[d - 1], rooms[d], byte_[i]);
      if (s == nullptr) {
        i = end_[i];
        continue;
      }
      at[d] = s;
      visit(i);
      ++i;
    }
  }

 private:
  std::vector<uint8_t> byte_;
  std::vector<uint16_t> depth_;
  std::vector<uint32_t> end_;
  std::vector<uint32_t> first_id_;  // size() + 1 entries
  std::vector<int32_t> ids_;
  uint32_t max_depth_ = 0;
};

}  // namespace kiln::engine
