// A deterministic automaton over Unicode code points: the strings a JSON-schema `pattern` or
// `format` allows (regex_subset.h, string_formats.h), with minLength/maxLength folded in, as
// the constrained JSON decoder (json_matcher.h) walks them one decoded character at a time.
//
// Alphabet: the code points a JSON string can carry as one raw UTF-8 character or one short
// escape (\b \t \n \f \r and printable ones), i.e. no other control characters and no
// surrogates; the decoder writes no \u escapes in such strings, so a pattern that needs one
// simply matches fewer strings.
//
// Invariant (after trim()): every state reaches an accepting state, so a decoder that only
// takes existing edges can always finish the string.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kiln/engine/json/constraint_budget.h"

namespace kiln::engine {

struct CodePointRange {
  uint32_t lo = 0, hi = 0;  // inclusive
};
using CodePointSet = std::vector<CodePointRange>;  // sorted, disjoint, not adjacent

// Set algebra on code point sets.
CodePointSet normalized(CodePointSet s);  // sorts and merges overlapping/adjacent ranges
CodePointSet complement(const CodePointSet& s);
CodePointSet intersection(const CodePointSet& a, const CodePointSet& b);
// What a constrained JSON string may contain (see above).
const CodePointSet& writable_code_points();

class StringAutomaton {
 public:
  struct Edge {
    uint32_t lo, hi, to;  // code points lo..hi lead to state `to`
  };
  // Limits on the automata built from schemas: a schema is request input.
  static constexpr size_t kMaxStates = 1 << 16;

  // The state after `cp`, or -1 when no allowed string continues with it.
  int64_t next(uint32_t state, uint32_t cp) const;
  // Some code point in lo..hi continues from `state` (a partial UTF-8 character's range).
  bool has_edge_within(uint32_t state, uint32_t lo, uint32_t hi) const;
  bool accepting(uint32_t state) const { return accepting_[state] != 0; }
  // Every writable character leads back to `state` (an unanchored pattern's tail): strings go
  // on as if unconstrained. Known after trim().
  bool loops_on_everything(uint32_t state) const {
    return state < universal_.size() && universal_[state] != 0;
  }
  static constexpr uint32_t start() { return 0; }
  size_t size() const { return edges_.size(); }
  const std::vector<Edge>& edges(uint32_t state) const { return edges_[state]; }

  // Building. add_state returns its index; state 0 is the start. Edges of one state must be
  // added in increasing, disjoint ranges.
  uint32_t add_state(bool accepting);
  void add_edge(uint32_t from, uint32_t lo, uint32_t hi, uint32_t to);
  // Drops states unreachable from the start or unable to reach an accepting state, and
  // merges adjacent ranges leading to the same state. False when no string is accepted.
  // Linear in states and edges.
  bool trim(ConstraintBudget& budget);

  // Strings accepted by both (throws std::length_error past kMaxStates).
  static StringAutomaton intersect(const StringAutomaton& a, const StringAutomaton& b,
                                   ConstraintBudget& budget);
  // Any writable characters, between min_chars and max_chars of them (max UINT32_MAX: no
  // upper limit; throws std::length_error past kMaxStates).
  static StringAutomaton length_between(uint32_t min_chars, uint32_t max_chars,
                                        ConstraintBudget& budget);

  // The same, each with a budget of its own (one constraint built on its own, as in tests).
  bool trim() {
    ConstraintBudget budget;
    return trim(budget);
  }
  static StringAutomaton intersect(const StringAutomaton& a, const StringAutomaton& b) {
    ConstraintBudget budget;
    return intersect(a, b, budget);
  }
  static StringAutomaton length_between(uint32_t min_chars, uint32_t max_chars) {
    ConstraintBudget budget;
    return length_between(min_chars, max_chars, budget);
  }

 private:
  // Returns the state they became, or UINT32_MAX when there is none. `into`: each state's
  // predecessors (one entry per edge).
  uint32_t merge_universal_states(const std::vector<uint8_t>& live,
                                  const std::vector<std::vector<uint32_t>>& into);

  std::vector<std::vector<Edge>> edges_;
  std::vector<uint8_t> accepting_;
  std::vector<uint8_t> universal_;
};

}  // namespace kiln::engine
