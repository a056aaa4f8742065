#include "kiln/engine/json/token_trie.h"

#include <algorithm>
#include <atomic>
#include <limits>

#include "kiln/base/error.h"

namespace kiln::engine {

TokenTrie TokenTrie::from_pieces(const std::vector<std::string>& pieces) {
  std::vector<std::pair<int32_t, std::string>> tokens;
  tokens.reserve(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i)
    tokens.emplace_back(static_cast<int32_t>(i), pieces[i]);
  return TokenTrie(std::move(tokens));
}

TokenTrie::TokenTrie(std::vector<std::pair<int32_t, std::string>> tokens) {
  static std::atomic<uint64_t> next_serial{1};
  serial_ = next_serial.fetch_add(1);
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
  classify_string_content();
}

namespace {
// Where a path stands in UTF-8 string content: `need` continuation bytes still to come, the
// next one in [lo, hi]; `plain` false once a byte broke it.
struct Utf8Walk {
  bool plain = true;
  uint8_t need = 0, lo = 0x80, hi = 0xBF;
};

Utf8Walk utf8_step(Utf8Walk s, uint8_t b) {
  if (!s.plain) return s;
  if (s.need > 0) {
    if (b < s.lo || b > s.hi) return Utf8Walk{false};
    return Utf8Walk{true, static_cast<uint8_t>(s.need - 1), 0x80, 0xBF};
  }
  if (b < 0x20 || b == '"' || b == '\\') return Utf8Walk{false};
  if (b < 0x80) return Utf8Walk{};
  if (b >= 0xC2 && b <= 0xDF) return Utf8Walk{true, 1, 0x80, 0xBF};
  if (b == 0xE0) return Utf8Walk{true, 2, 0xA0, 0xBF};
  if (b == 0xED) return Utf8Walk{true, 2, 0x80, 0x9F};
  if (b >= 0xE1 && b <= 0xEF) return Utf8Walk{true, 2, 0x80, 0xBF};
  if (b == 0xF0) return Utf8Walk{true, 3, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return Utf8Walk{true, 3, 0x80, 0xBF};
  if (b == 0xF4) return Utf8Walk{true, 3, 0x80, 0x8F};
  return Utf8Walk{false};
}
}  // namespace

void TokenTrie::classify_string_content() {
  class_.assign(byte_.size(), kNotPlain);
  std::vector<Utf8Walk> at(max_depth_ + 1);  // the walk at each depth of the current path
  std::vector<uint8_t> cls_at(max_depth_ + 1, kPlainBoundary);  // depth 0: the root
  std::vector<uint32_t> chars(max_depth_ + 1, 0);               // characters started on the path
  int32_t max_id = -1;
  for (int32_t id : ids_) max_id = std::max(max_id, id);
  plain_mask_.assign(static_cast<size_t>(max_id) + 1, 0);  // max_id -1: empty
  for (size_t i = 1; i < byte_.size(); ++i) {
    const uint32_t d = depth_[i];
    at[d] = utf8_step(at[d - 1], byte_[i]);
    class_[i] = !at[d].plain ? kNotPlain : at[d].need == 0 ? kPlainBoundary : kPlainMidChar;
    cls_at[d] = class_[i];
    if (class_[i] == kNotPlain) {
      if (cls_at[d - 1] == kPlainBoundary) {
        frontier_.push_back(static_cast<uint32_t>(i));
        frontier_chars_.push_back(chars[d - 1]);
      }
      continue;
    }
    chars[d] = chars[d - 1] + (at[d - 1].need == 0 ? 1 : 0);  // a byte that starts a character
    if (first_id_[i] != first_id_[i + 1] && chars[d] >= plain_by_chars_.size())
      plain_by_chars_.resize(chars[d] + 1);
    for (uint32_t k = first_id_[i]; k < first_id_[i + 1]; ++k) {
      plain_mask_[static_cast<size_t>(ids_[k])] = 1;
      ++plain_count_;
      plain_by_chars_[chars[d]].push_back(ids_[k]);
    }
  }
}

}  // namespace kiln::engine
