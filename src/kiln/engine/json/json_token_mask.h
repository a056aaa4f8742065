// One decoding step under a JSON constraint: which tokens may come next. A token is allowed
// when the matcher accepts every one of its bytes from the current state (found by walking
// the vocabulary's byte trie with the matcher, token_trie.h); the end-of-sequence ids only
// when the value is complete. Tokens outside the trie (special tokens, tokens with no bytes)
// are never allowed.
#pragma once
#include <cstdint>
#include <span>

#include "kiln/engine/json/json_matcher.h"
#include "kiln/engine/json/token_trie.h"

namespace kiln::engine {

// Sets allowed[id] = 1 for every allowed token and 0 for the rest; returns how many are
// allowed. `allowed` spans the whole vocabulary (ids past its end are ignored).
int64_t json_allowed_tokens(const TokenTrie& trie, const JsonMatcher& matcher,
                            std::span<const int32_t> end_ids, std::span<uint8_t> allowed);

}  // namespace kiln::engine
