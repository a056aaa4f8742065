#include "kiln/engine/ngram_proposer.h"

#include <algorithm>

namespace kiln::engine {

std::vector<int32_t> propose_ngram(std::span<const int32_t> tokens, const NgramProposerConfig& cfg,
                                   int max_tokens, int64_t window) {
  const auto n = static_cast<int64_t>(tokens.size());
  const int64_t begin = window > 0 ? std::max<int64_t>(0, n - window) : 0;
  const int lo = std::max(cfg.min_match, 1);
  if (max_tokens <= 0) return {};
  for (int m = cfg.max_match; m >= lo; --m) {
    if (begin + m >= n) continue;  // no room for an earlier occurrence and a continuation
    const std::span<const int32_t> suffix = tokens.subspan(static_cast<size_t>(n - m));
    // The most recent earlier occurrence whose continuation starts before the suffix itself:
    // start positions s with s + m < n, newest first.
    for (int64_t s = n - m - 1; s >= begin; --s) {
      if (!std::equal(suffix.begin(), suffix.end(), tokens.begin() + s)) continue;
      const int64_t from = s + m;
      const int64_t len = std::min<int64_t>(max_tokens, n - from);
      return {tokens.begin() + from, tokens.begin() + from + len};
    }
  }
  return {};
}

}  // namespace kiln::engine
