// Token classes that a parse stack's top frames decide alone (XGrammar's context-independent
// tokens, by stack suffix). Feeding a token to a stack either stays within its top K positions
// (the suffix) or pops below them at some byte. Walking the trie from the suffix alone sorts
// every token into: accepted (some parse consumes it without popping below: accepted whatever
// lies below), refused (every parse refuses it before any pops below: refused whatever lies
// below), or open (a parse popped below before the refusal: only the whole stack can tell).
// The open tokens are whole trie subtrees, kept as their roots with the bytes leading to them.
//
// States that differ only below their stacks' top K positions (a JSON string at any depth of
// nesting, the same list item at any level) share the classes, so their masks cost an OR of
// bit sets and a walk of the open subtrees instead of a walk of the whole vocabulary.
// Cached process-wide per (trie, grammar, suffix); an entry keeps its grammar alive.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/engine/grammar/grammar.h"
#include "kiln/engine/json/token_trie.h"

namespace kiln::engine {

// Positions of a stack's top a class is computed for.
constexpr size_t kGrammarSuffixLength = 4;

struct GrammarSuffixClass {
  struct Open {
    uint32_t node;     // a trie node whose subtree needs the whole stack
    std::string path;  // the bytes from the root to its parent
  };
  std::vector<uint64_t> accepted;  // one bit per token id
  std::vector<Open> open;
  std::shared_ptr<const Grammar> grammar;  // what the key's address names, kept alive
  size_t bytes() const;
};

// The class of `suffix` (a stack's top positions, bottom first). `whole`: the suffix is the whole
// stack, so popping below it means the parse is finished and nothing is open.
std::shared_ptr<const GrammarSuffixClass> grammar_suffix_class(
    const TokenTrie& trie, const std::shared_ptr<const Grammar>& grammar,
    std::span<const uint32_t> suffix, bool whole, int64_t vocab);
// The class when it is cached already, else null (computes nothing).
std::shared_ptr<const GrammarSuffixClass> cached_grammar_suffix_class(
    const TokenTrie& trie, const Grammar& grammar, std::span<const uint32_t> suffix, bool whole,
    int64_t vocab);

}  // namespace kiln::engine
