// Finds special-token text (control and user-defined tokens) inside input text, leftmost-longest,
// with a byte trie so that the scan costs a few lookups per candidate position.
#pragma once
#include <array>
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kiln::model {

class SpecialTokenMatcher {
 public:
  struct Match {
    size_t length = 0;  // 0: no match
    int32_t id = -1;
  };

  // `always`: user-defined tokens, matched whatever the caller asks; otherwise the token is
  // matched only when match() is called with parse_special. A text already added keeps its
  // first id.
  void add(std::string_view text, int32_t id, bool always);

  // The longest allowed token starting exactly at text[0].
  Match match(std::string_view text, bool parse_special) const;

  bool may_start(unsigned char byte) const { return first_byte_[byte]; }

 private:
  struct Node {
    int32_t id = -1;
    bool always = false;
  };
  static uint64_t edge_key(int32_t node, unsigned char byte) {
    return (static_cast<uint64_t>(node) << 8) | byte;
  }

  std::vector<Node> nodes_{Node{}};  // node 0 is the root
  std::unordered_map<uint64_t, int32_t> edges_;
  std::array<bool, 256> first_byte_{};
};

}  // namespace kiln::model
