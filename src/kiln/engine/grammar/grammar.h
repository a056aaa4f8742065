// A compiled grammar: rules over bytes, what the matcher (grammar_matcher.h) runs. Characters
// are already spelled out as UTF-8 (a class beyond ASCII is a small rule of byte-range
// sequences, utf8_ranges.h), so the matcher never holds a partial character: a byte in the
// middle of one is a position inside such a rule.
//
// Layout (as llama.cpp lays out its GBNF rules): one flat array of elements, each alternative
// of each rule a run of them closed by kEnd; a position in it is an element index. Element 0
// refers to the start rule (then kEnd), so the start is the position-0 stack.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln::engine {

using ByteSet = std::array<uint64_t, 4>;

inline bool byte_set_has(const ByteSet& s, uint8_t b) { return (s[b >> 6] >> (b & 63) & 1) != 0; }

struct Grammar {
  enum Kind : uint8_t { kBytes, kRule, kEnd };
  std::vector<uint8_t> kind;    // per element
  std::vector<uint32_t> value;  // kBytes: index into byte_sets; kRule: the rule
  std::vector<ByteSet> byte_sets;
  std::vector<std::vector<uint32_t>> alternatives;  // per rule: where each alternative starts
  std::vector<std::string> rule_names;              // generated rules: "<owner>/<what>"
  size_t source_bytes = 0;  // the text it was compiled from (for the cache's size)

  bool is_end(uint32_t pos) const { return kind[pos] == kEnd; }
  size_t approx_bytes() const {
    return kind.size() * 5 + byte_sets.size() * sizeof(ByteSet) + alternatives.size() * 32 +
           source_bytes;
  }
};

}  // namespace kiln::engine
