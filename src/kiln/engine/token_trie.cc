#include "kiln/engine/token_trie.h"

#include <algorithm>
#include <limits>

#include "kiln/base/error.h"

namespace kiln::engine {

TokenTrie::TokenTrie(std::vector<std::pair<int32_t, std::string>> tokens) {
  std::erase_if(tokens, [](const auto& t) { return t.second.empty(); });
  // Sorted byte strings list the trie in preorder: a prefix sorts before its extensions, and
  // strings sharing a prefix are adjacent.
  std::sort(tokens.begin(), tokens.end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second < b.second : a.first < b.first;
  });
  byte_.push_back(0);
  depth_.push_back(0);
  end_.push_back(0);
  first_id_.push_back(0);
  std::vector<uint32_t> path = {0};  // nodes from the root to the last one created
  const std::string* prev = nullptr;
  auto close = [&](uint32_t node) { end_[node] = static_cast<uint32_t>(byte_.size()); };
  for (const auto& [id, bytes] : tokens) {
    KILN_CHECK(bytes.size() < std::numeric_limits<uint16_t>::max(),
               "token {} is too long for the token trie ({} bytes)", id, bytes.size());
    size_t common = 0;
    if (prev != nullptr) {
      while (common < prev->size() && common < bytes.size() && (*prev)[common] == bytes[common]) {
        ++common;
      }
    }
    while (path.size() > common + 1) {  // leave the nodes beyond the shared prefix
      close(path.back());
      path.pop_back();
    }
    for (size_t k = common; k < bytes.size(); ++k) {
      byte_.push_back(static_cast<uint8_t>(bytes[k]));
      depth_.push_back(static_cast<uint16_t>(k + 1));
      end_.push_back(0);
      first_id_.push_back(static_cast<uint32_t>(ids_.size()));
      path.push_back(static_cast<uint32_t>(byte_.size() - 1));
    }
    max_depth_ = std::max<uint32_t>(max_depth_, static_cast<uint32_t>(bytes.size()));
    ids_.push_back(id);  // the ids of a node are contiguous: duplicates sort together
    prev = &bytes;
  }
  while (!path.empty()) {
    close(path.back());
    path.pop_back();
  }
  first_id_.push_back(static_cast<uint32_t>(ids_.size()));
}

}  // namespace kiln::engine
