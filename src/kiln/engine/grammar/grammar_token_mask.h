// One decoding step under a grammar: which tokens may come next (as json_token_mask.h does for
// a JSON schema). A token is allowed when the matcher accepts all its bytes from the current
// state, found by walking the vocabulary's byte trie (token_trie.h) and pruning a subtree at
// its first refused byte; the end ids only when the output is a whole sentence.
//
// The walk memoizes transitions (grammar_walk_memo.h): states are numbered as the walk meets them,
// and the state after (state, byte) is computed once. Inside free text (a [^"]* loop, a comment)
// nearly every trie node's parent is the same state, so most of the 262,144 tokens' nodes are a
// table lookup, not a run of the automaton.
#pragma once
#include <cstdint>
#include <span>

#include "kiln/engine/grammar/grammar_matcher.h"
#include "kiln/engine/json/token_trie.h"

namespace kiln::engine {

// Sets allowed[id] = 1 for every allowed token and 0 for the rest; returns how many are
// allowed. `allowed` spans the whole vocabulary (ids past its end are ignored).
// Through the stacks' suffix classes (grammar_suffix_masks.h) when at most one of them is new,
// else the plain walk.
int64_t grammar_allowed_tokens(const TokenTrie& trie, const GrammarMatcher& matcher,
                               std::span<const int32_t> end_ids, std::span<uint8_t> allowed);
// The whole trie walked from the state (the reference the classes must agree with).
int64_t grammar_allowed_tokens_plain(const TokenTrie& trie, const GrammarMatcher& matcher,
                                     std::span<const int32_t> end_ids, std::span<uint8_t> allowed);

}  // namespace kiln::engine
