// Draft-free proposals for speculative decoding (prompt lookup, SGLang's NGRAM and llama.cpp's
// ngram modes): the last n tokens of a request (its prompt and output so far) are looked up
// earlier in the same tokens, and the tokens that followed the most recent earlier occurrence
// are proposed as the continuation. Output that quotes its input (code edits, extraction,
// "repeat with changes") is where this pays: the model copies, and the copy is already there.
//
// Longer matches are tried first (max_match down to min_match tokens): a longer shared context
// predicts the continuation better. The proposal is a guess only; the verify step keeps just
// the tokens the model itself would have produced.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace kiln::engine {

struct NgramProposerConfig {
  int min_match = 1;   // shortest suffix looked up (tokens)
  int max_match = 12;  // longest suffix looked up
};

// Up to `max_tokens` proposed continuation tokens of `tokens` (empty when no suffix of at least
// min_match tokens occurs earlier). The search covers at most the last `window` tokens (0: all
// of them), so its cost per step stays bounded on long contexts.
std::vector<int32_t> propose_ngram(std::span<const int32_t> tokens, const NgramProposerConfig& cfg,
                                   int max_tokens, int64_t window = 0);

}  // namespace kiln::engine
