// Piece text -> token id, as a flat open-addressing table. Tokenizing a long prompt looks up
// tens of thousands of candidate pieces in a vocab of up to ~262k; a node-based unordered_map
// spends most of that time on cache misses.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::model {

class PieceIndex {
 public:
  // `pieces` must outlive the index and not change; only ids with include(id) are indexed.
  // The first id of a duplicated text wins.
  template <typename Include>
  void build(const std::vector<std::string>& pieces, Include include) {
    pieces_ = &pieces;
    size_t capacity = 16;
    while (capacity < pieces.size() * 2) capacity *= 2;
    slots_.assign(capacity, Slot{0, -1});
    mask_ = capacity - 1;
    for (size_t i = 0; i < pieces.size(); ++i) {
      if (include(static_cast<int32_t>(i))) insert(static_cast<int32_t>(i));
    }
  }

  std::optional<int32_t> find(std::string_view text) const {
    const int32_t id = find_or(text, -1);
    return id < 0 ? std::nullopt : std::optional<int32_t>(id);
  }
  int32_t find_or(std::string_view text, int32_t missing) const;

 private:
  struct Slot {
    uint32_t tag;  // high bits of the hash: most mismatches are rejected without reading text
    int32_t id;
  };
  static uint64_t hash(std::string_view text);
  void insert(int32_t id);

  const std::vector<std::string>* pieces_ = nullptr;
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

}  // namespace kiln::model
