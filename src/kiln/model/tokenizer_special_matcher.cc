#include "kiln/model/tokenizer_special_matcher.h"

namespace kiln::model {

void SpecialTokenMatcher::add(std::string_view text, int32_t id, bool always) {
  if (text.empty()) return;
  int32_t node = 0;
  for (unsigned char c : text) {
    auto [it, inserted] =
        edges_.try_emplace(edge_key(node, c), static_cast<int32_t>(nodes_.size()));
    if (inserted) nodes_.push_back(Node{});
    node = it->second;
  }
  if (nodes_[node].id < 0) nodes_[node] = Node{id, always};
  first_byte_[static_cast<unsigned char>(text[0])] = true;
}

SpecialTokenMatcher::Match SpecialTokenMatcher::match(std::string_view text,
                                                      bool parse_special) const {
  Match best;
  if (text.empty() || !first_byte_[static_cast<unsigned char>(text[0])]) return best;
  int32_t node = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    auto it = edges_.find(edge_key(node, static_cast<unsigned char>(text[i])));
    if (it == edges_.end()) break;
    node = it->second;
    const Node& n = nodes_[node];
    if (n.id >= 0 && (n.always || parse_special)) best = Match{i + 1, n.id};
  }
  return best;
}

}  // namespace kiln::model
