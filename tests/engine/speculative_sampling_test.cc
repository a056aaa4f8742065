// The speculative sampling rule (Sampler::sample_or_accept) against the distribution it must
// keep: on an 8-token vocabulary, under temperature, top-k, top-p and min-p, and for a proposal
// that is the likeliest token, a middling one and one the truncation removes, the tokens it
// returns are distributed as the target distribution (computed here from the definitions, not
// by the sampler), by a chi-square test at fixed seeds; the proposal is kept as often as its
// probability says; greedy parameters keep exactly the argmax.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "kiln/engine/sampler.h"

namespace kiln::engine {
namespace {

const std::vector<float> kLogits = {2.0f, 1.5f, 1.0f, 0.5f, 0.0f, -0.5f, -1.0f, -3.0f};

// The distribution sample() draws from, from the definitions in sampler.h: softmax at the
// temperature, then the shortest of the top k, the top-p prefix and the min-p set, renormalized.
std::vector<double> target_distribution(const SamplingParams& p) {
  const size_t n = kLogits.size();
  std::vector<double> prob(n);
  double z = 0;
  for (size_t i = 0; i < n; ++i) z += prob[i] = std::exp(kLogits[i] / p.temperature);
  for (double& x : prob) x /= z;
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return prob[a] > prob[b]; });
  size_t keep = n;
  if (p.top_k > 0) keep = std::min<size_t>(keep, static_cast<size_t>(p.top_k));
  if (p.top_p < 1.0) {
    double mass = 0;
    size_t k = 0;
    while (k < n && (k == 0 || mass < p.top_p)) mass += prob[order[k++]];
    keep = std::min(keep, k);
  }
  if (p.min_p > 0) {
    size_t k = 0;
    while (k < n && prob[order[k]] >= p.min_p * prob[order[0]]) ++k;
    keep = std::min(keep, k);
  }
  std::vector<double> out(n, 0.0);
  double kept = 0;
  for (size_t k = 0; k < keep; ++k) kept += prob[order[k]];
  for (size_t k = 0; k < keep; ++k) out[order[k]] = prob[order[k]] / kept;
  return out;
}

// Pearson's chi-square of `counts` against `expected` probabilities (cells with probability 0
// must be empty; the statistic is infinite otherwise).
double chi_square(const std::vector<int>& counts, const std::vector<double>& expected, int n) {
  double chi = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (expected[i] == 0) {
      if (counts[i] != 0) return INFINITY;
      continue;
    }
    const double e = expected[i] * n;
    chi += (counts[i] - e) * (counts[i] - e) / e;
  }
  return chi;
}

TEST(SpeculativeSampling, TheRuleKeepsTheTargetDistribution) {
  std::vector<SamplingParams> settings(4);
  settings[0].temperature = 1.0;
  settings[1].temperature = 0.7;
  settings[1].top_k = 4;
  settings[2].temperature = 1.3;
  settings[2].top_p = 0.8;
  settings[3].temperature = 1.0;
  settings[3].min_p = 0.15;
  constexpr int kDraws = 40000;
  // Chi-square critical value for 7 degrees of freedom at p = 0.0001 (fewer cells only lower
  // the statistic's expected value): a correct rule fails this at one seed in 10,000.
  constexpr double kCritical = 29.88;
  for (size_t s = 0; s < settings.size(); ++s) {
    const std::vector<double> want = target_distribution(settings[s]);
    for (int32_t proposed : {0, 3, 7}) {
      SCOPED_TRACE("setting " + std::to_string(s) + ", proposal " + std::to_string(proposed));
      Sampler sampler(settings[s], 1000 + 17 * s + static_cast<uint64_t>(proposed));
      std::vector<int> counts(kLogits.size(), 0);
      int kept = 0;
      for (int i = 0; i < kDraws; ++i) {
        std::vector<float> row = kLogits;
        bool accepted = false;
        const int32_t t = sampler.sample_or_accept(row, proposed, &accepted);
        ++counts[static_cast<size_t>(t)];
        EXPECT_EQ(accepted, t == proposed);
        kept += accepted ? 1 : 0;
      }
      EXPECT_LT(chi_square(counts, want, kDraws), kCritical);
      // Kept as often as its probability: within 5 standard deviations.
      const double p = want[static_cast<size_t>(proposed)];
      EXPECT_NEAR(kept, p * kDraws, 5 * std::sqrt(kDraws * p * (1 - p)) + 1);
    }
  }
}

// The check above can fail: a rule that keeps every proposal, or draws the residual from the
// full distribution (proposal included), is far from the target.
TEST(SpeculativeSampling, TheTestRejectsWrongRules) {
  SamplingParams params;
  const std::vector<double> want = target_distribution(params);
  Sampler sampler(params, 5);
  std::vector<int> always_kept(kLogits.size(), 0), resampled(kLogits.size(), 0);
  constexpr int kDraws = 40000;
  for (int i = 0; i < kDraws; ++i) {
    always_kept[3]++;  // "accept every proposal"
    // "On a miss, draw again from p": p(3) + (1 - p(3)) p(3) for the proposal.
    std::vector<float> row = kLogits;
    bool accepted = false;
    int32_t t = sampler.sample_or_accept(row, 3, &accepted);
    if (!accepted) {
      std::vector<float> again = kLogits;
      t = sampler.sample(again);
    }
    ++resampled[static_cast<size_t>(t)];
  }
  EXPECT_GT(chi_square(always_kept, want, kDraws), 29.88);
  EXPECT_GT(chi_square(resampled, want, kDraws), 29.88);
}

TEST(SpeculativeSampling, GreedyKeepsExactlyTheArgmax) {
  SamplingParams greedy;
  greedy.temperature = 0.0;
  Sampler sampler(greedy, 1);
  for (int32_t proposed = 0; proposed < 8; ++proposed) {
    std::vector<float> row = kLogits;
    bool accepted = !proposed;
    EXPECT_EQ(sampler.sample_or_accept(row, proposed, &accepted), 0);
    EXPECT_EQ(accepted, proposed == 0);
  }
}

}  // namespace
}  // namespace kiln::engine
