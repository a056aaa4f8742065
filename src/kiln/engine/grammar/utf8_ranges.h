// A code point range as UTF-8: the byte-range sequences whose concatenations are exactly the
// encodings of its code points, e.g. U+0080..U+07FF is [C2-DF][80-BF]. A character class
// beyond ASCII becomes one alternative per sequence, so the grammar matcher works on bytes.
#pragma once
#include <cstdint>
#include <vector>

#include "kiln/engine/json/string_automaton.h"

namespace kiln::engine {

struct ByteRange {
  uint8_t lo, hi;
};
using ByteRangeSeq = std::vector<ByteRange>;  // 1 to 4 ranges

// `set` must hold no surrogate (U+D800..U+DFFF): they have no UTF-8 encoding.
std::vector<ByteRangeSeq> utf8_sequences(const CodePointSet& set);

}  // namespace kiln::engine
