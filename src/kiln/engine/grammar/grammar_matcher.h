// An incremental pushdown automaton over bytes for a compiled grammar (grammar.h), in the
// manner of llama.cpp's GBNF interpreter: the state is the set of every parse stack still
// alive, each stack a list of grammar positions (the top is the next byte set to match, the
// rest where to return to). Feeding a byte advances every stack whose top accepts it and
// expands the rules that come next until each top is a byte set again; stacks that refuse the
// byte die. Stacks are deduplicated and sorted, so equal states are equal values (the mask
// cache keys on them); right recursion (x*) does not grow a stack, because a finished rule's
// return position is only pushed when something follows it.
//
// Invariant (from compile_grammar's checks): every prefix the matcher accepts can be completed.
// Bounds: at most kMaxGrammarStacks stacks and kMaxGrammarDepth positions per stack; a byte that
// would pass either is refused (a grammar so ambiguous or so deeply nested that generation would
// slow every step; the mask then steers around it).
#pragma once
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "kiln/engine/grammar/grammar.h"

namespace kiln::engine {

constexpr size_t kMaxGrammarStacks = 256;
constexpr size_t kMaxGrammarDepth = 512;
// Rules expanded in a row before a byte is read (nested rules that can all be empty).
constexpr size_t kMaxGrammarExpansion = 4096;

// The stacks, flattened: each as its length then its positions (bottom first), in sorted order.
struct GrammarState {
  std::vector<uint32_t> data;
  bool operator==(const GrammarState& o) const { return data == o.data; }
};

GrammarState grammar_start(const Grammar& g);
// False: no stack accepts the byte (or a bound was passed); `state` is then unspecified.
bool grammar_feed(const Grammar& g, GrammarState& state, uint8_t byte);
// Some stack is empty: the bytes so far are a whole sentence of the grammar.
bool grammar_complete(const GrammarState& state);

// The per-request object: a grammar and where generation stands in it.
class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const Grammar> grammar)
      : grammar_(std::move(grammar)), state_(grammar_start(*grammar_)) {}

  bool feed(std::string_view bytes) {
    for (char c : bytes) {
      if (!grammar_feed(*grammar_, state_, static_cast<uint8_t>(c))) return false;
    }
    return true;
  }
  bool complete() const { return grammar_complete(state_); }
  const Grammar& grammar() const { return *grammar_; }
  const std::shared_ptr<const Grammar>& grammar_ptr() const { return grammar_; }
  const GrammarState& state() const { return state_; }

 private:
  std::shared_ptr<const Grammar> grammar_;
  GrammarState state_;
};

}  // namespace kiln::engine
