// Prompt-lookup proposals: the continuation of the most recent earlier occurrence of the
// longest matching suffix, bounded by the match window, the token budget and the lookup window.
#include "kiln/engine/ngram_proposer.h"

#include <gtest/gtest.h>

namespace kiln::engine {
namespace {

using Tokens = std::vector<int32_t>;

TEST(NgramProposer, ProposesWhatFollowedTheSuffixEarlier) {
  // "1 2 3 4 5 ... 1 2" -> 3 4 5 follow the earlier "1 2".
  const Tokens t = {1, 2, 3, 4, 5, 9, 1, 2};
  EXPECT_EQ(propose_ngram(t, {2, 4}, 3), (Tokens{3, 4, 5}));
  EXPECT_EQ(propose_ngram(t, {2, 4}, 2), (Tokens{3, 4}));
  EXPECT_EQ(propose_ngram(t, {2, 4}, 0), Tokens{});
}

TEST(NgramProposer, LongerMatchesWinOverMoreRecentShorterOnes) {
  // The suffix "7 1 2" occurs at the start (followed by 3); "1 2" alone occurs more recently
  // (followed by 8). The 3-token match decides.
  const Tokens t = {7, 1, 2, 3, 0, 1, 2, 8, 5, 7, 1, 2};
  EXPECT_EQ(propose_ngram(t, {1, 3}, 1), (Tokens{3}));
  // With matches of at most 2 tokens the most recent "1 2" decides.
  EXPECT_EQ(propose_ngram(t, {1, 2}, 1), (Tokens{8}));
}

TEST(NgramProposer, NothingBelowTheMinimumMatch) {
  const Tokens t = {1, 2, 3, 4, 5, 6, 9, 5};  // only a 1-token match ("5")
  EXPECT_EQ(propose_ngram(t, {2, 4}, 4), Tokens{});
  EXPECT_EQ(propose_ngram(t, {1, 4}, 4), (Tokens{6, 9, 5}));
  EXPECT_EQ(propose_ngram(Tokens{}, {1, 4}, 4), Tokens{});
  EXPECT_EQ(propose_ngram(Tokens{5}, {1, 4}, 4), Tokens{});
}

TEST(NgramProposer, ARepeatingTailProposesItsOwnContinuation) {
  // In a loop the match overlaps the suffix: "a b a b a" -> "b a" follows the earlier "a b a".
  const Tokens t = {4, 5, 4, 5, 4};
  EXPECT_EQ(propose_ngram(t, {1, 3}, 4), (Tokens{5, 4}));
}

TEST(NgramProposer, TheLookupWindowBoundsTheSearch) {
  const Tokens t = {1, 2, 3, 0, 0, 0, 0, 0, 0, 1, 2};
  EXPECT_EQ(propose_ngram(t, {2, 2}, 1), (Tokens{3}));
  EXPECT_EQ(propose_ngram(t, {2, 2}, 1, /*window=*/6), Tokens{});
}

}  // namespace
}  // namespace kiln::engine
