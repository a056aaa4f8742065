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
  // Token i is pieces[i] (the small vocabularies of tests and fuzzers).
  static TokenTrie from_pieces(const std::vector<std::string>& pieces);

  size_t size() const { return byte_.size(); }  // nodes, the root (index 0) included
  uint8_t byte(size_t node) const { return byte_[node]; }
  uint32_t depth(size_t node) const { return depth_[node]; }
  uint32_t subtree_end(size_t node) const { return end_[node]; }
  // Token ids whose bytes end at `node`.
  const int32_t* tokens_begin(size_t node) const { return ids_.data() + first_id_[node]; }
  const int32_t* tokens_end(size_t node) const { return ids_.data() + first_id_[node + 1]; }
  uint32_t max_depth() const { return max_depth_; }
  // Unique per trie in the process (a cache keyed by it cannot confuse two tries that took the
  // same address one after the other).
  uint64_t serial() const { return serial_; }
  size_t token_count() const { return ids_.size(); }

  // Whether the bytes from the root to `node` are plain JSON string content: well-formed
  // UTF-8 (kPlainMidChar: ending inside a character) with no quote, backslash or control
  // character. Inside a string such a token is always accepted and, ending on a character
  // boundary, leaves the state as it was: the mask takes those without running the automaton
  // (inside a string that is most of a 262,144-token vocabulary).
  enum StringClass : uint8_t { kNotPlain = 0, kPlainBoundary = 1, kPlainMidChar = 2 };
  StringClass string_class(size_t node) const { return static_cast<StringClass>(class_[node]); }
  // plain_mask()[id] = 1 for every token whose node is plain (indexed by id, up to the largest
  // id in the trie), and how many those are.
  const std::vector<uint8_t>& plain_mask() const { return plain_mask_; }
  int64_t plain_count() const { return plain_count_; }
  // The not-plain nodes right below the root or a plain node ending on a character boundary:
  // inside a string, the only subtrees that need the automaton (a not-plain node below a
  // partial character is always refused).
  const std::vector<uint32_t>& string_frontier() const { return frontier_; }
  // Characters of the plain content before string_frontier()[i] (its parent's path).
  uint32_t frontier_chars(size_t i) const { return frontier_chars_[i]; }
  // For strings with a maxLength: the plain tokens by how many characters they hold (a partial
  // character counts as one, as the automaton counts a lead byte), and the most any holds.
  uint32_t max_plain_chars() const { return static_cast<uint32_t>(plain_by_chars_.size()) - 1; }
  const std::vector<int32_t>& plain_tokens_with_chars(uint32_t chars) const {
    return plain_by_chars_[chars];
  }

 private:
  std::vector<uint8_t> byte_;
  std::vector<uint16_t> depth_;
  std::vector<uint32_t> end_;
  std::vector<uint32_t> first_id_;  // size() + 1 entries
  std::vector<int32_t> ids_;
  std::vector<uint8_t> class_;  // StringClass per node
  std::vector<uint8_t> plain_mask_;
  int64_t plain_count_ = 0;
  std::vector<uint32_t> frontier_;
  std::vector<uint32_t> frontier_chars_;
  std::vector<std::vector<int32_t>> plain_by_chars_{1};

  void classify_string_content();
  uint32_t max_depth_ = 0;
  uint64_t serial_ = 0;
};

}  // namespace kiln::engine
