#include "kiln/model/tokenizer_piece_index.h"

#include <xxhash.h>

namespace kiln::model {

uint64_t PieceIndex::hash(std::string_view text) { return XXH3_64bits(text.data(), text.size()); }

void PieceIndex::insert(int32_t id) {
  const std::string_view text = (*pieces_)[id];
  const uint64_t h = hash(text);
  const auto tag = static_cast<uint32_t>(h >> 32);
  for (size_t i = h & mask_;; i = (i + 1) & mask_) {
    Slot& s = slots_[i];
    if (s.id < 0) {
      s = Slot{tag, id};
      return;
    }
    if (s.tag == tag && (*pieces_)[s.id] == text) return;  // duplicate text: keep the first id
  }
}

int32_t PieceIndex::find_or(std::string_view text, int32_t missing) const {
  if (slots_.empty()) return missing;
  const uint64_t h = hash(text);
  const auto tag = static_cast<uint32_t>(h >> 32);
  for (size_t i = h & mask_;; i = (i + 1) & mask_) {
    const Slot& s = slots_[i];
    if (s.id < 0) return missing;
    if (s.tag == tag && (*pieces_)[s.id] == text) return s.id;
  }
}

}  // namespace kiln::model
