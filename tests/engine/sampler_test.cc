#include "kiln/engine/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <set>

#include "kiln/base/error.h"

namespace kiln::engine {
namespace {

SamplingParams params(double t, int k = -1, double p = 1.0, double min_p = 0.0) {
  SamplingParams s;
  s.temperature = t;
  s.top_k = k;
  s.top_p = p;
  s.min_p = min_p;
  return s;
}

std::vector<float> random_logits(int64_t n, uint64_t seed, float scale = 3.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

int32_t draw(Sampler& s, std::vector<float> logits) { return s.sample(logits); }

TEST(SamplerValidate, RejectsOutOfRange) {
  EXPECT_NO_THROW(validate(SamplingParams{}));
  auto bad = [](auto mutate) {
    SamplingParams p;
    mutate(p);
    EXPECT_THROW(validate(p), Error);
  };
  bad([](auto& p) { p.temperature = -0.1; });
  bad([](auto& p) { p.temperature = NAN; });
  bad([](auto& p) { p.temperature = INFINITY; });
  bad([](auto& p) { p.top_p = 0.0; });
  bad([](auto& p) { p.top_p = 1.5; });
  bad([](auto& p) { p.min_p = -0.1; });
  bad([](auto& p) { p.min_p = 1.1; });
  bad([](auto& p) { p.top_k = -2; });
  bad([](auto& p) { p.repetition_penalty = 0.0; });
  bad([](auto& p) { p.frequency_penalty = 2.5; });
  bad([](auto& p) { p.presence_penalty = -3; });
  bad([](auto& p) { p.logit_bias = {{-1, 1.0f}}; });
  bad([](auto& p) { p.logit_bias = {{3, 100.5f}}; });
  bad([](auto& p) { p.logit_bias = {{3, NAN}}; });
  EXPECT_THROW(Sampler(SamplingParams{}, 1, -2), Error);
}

TEST(Sampler, GreedyIsArgmaxWithLowestIdOnTies) {
  Sampler s(params(0.0), 1);
  EXPECT_EQ(draw(s, {1, 5, 5, 2}), 1);
  EXPECT_EQ(draw(s, {7, 5, 7, 2}), 0);
  Sampler k1(params(0.8, 1), 1);  // top_k = 1 is greedy too
  EXPECT_EQ(draw(k1, {1, 5, 5, 2}), 1);
  EXPECT_TRUE(s.greedy_fast_path_ok());
}

TEST(Sampler, NanLogitsAreAnError) {
  Sampler s(params(1.0), 1);
  EXPECT_THROW(draw(s, {1, NAN, 0}), Error);
  Sampler g(params(0.0), 1);
  EXPECT_THROW(draw(g, {1, NAN, 0}), Error);
}

TEST(Sampler, SeedReproducesAndDifferentSeedsDiffer) {
  const auto logits = random_logits(1000, 7, 1.0f);
  Sampler a(params(1.0), 42), b(params(1.0), 42), c(params(1.0), 43);
  std::vector<int32_t> ra, rb, rc;
  for (int i = 0; i < 50; ++i) {
    ra.push_back(draw(a, logits));
    rb.push_back(draw(b, logits));
    rc.push_back(draw(c, logits));
  }
  EXPECT_EQ(ra, rb);
  EXPECT_NE(ra, rc);
}

TEST(Sampler, FrequenciesFollowSoftmaxWithTemperature) {
  const std::vector<float> logits{0.0f, 1.0f, 2.0f, -1.0f};
  const double t = 0.7;
  Sampler s(params(t), 5);
  std::vector<int> counts(4, 0);
  const int n = 40000;
  for (int i = 0; i < n; ++i) ++counts[static_cast<size_t>(draw(s, logits))];
  double z = 0;
  for (float l : logits) z += std::exp(l / t);
  for (size_t i = 0; i < 4; ++i) {
    const double p = std::exp(logits[i] / t) / z;
    const double sd = std::sqrt(n * p * (1 - p));
    EXPECT_NEAR(counts[i], n * p, 5 * sd + 1) << "token " << i;
  }
}

TEST(Sampler, TopKNeverEmitsExcludedTokensOnAWideVocabulary) {
  const auto logits = random_logits(262144, 3, 1.0f);
  std::vector<int32_t> order(logits.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::partial_sort(order.begin(), order.begin() + 20, order.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  const std::set<int32_t> allowed(order.begin(), order.begin() + 20);
  Sampler s(params(1.5, 20), 9);
  std::set<int32_t> seen;
  for (int i = 0; i < 400; ++i) {
    const int32_t t = draw(s, logits);
    ASSERT_TRUE(allowed.count(t)) << t;
    seen.insert(t);
  }
  EXPECT_GT(seen.size(), 10u);  // and it does sample among them
}

TEST(Sampler, TopPKeepsTheSmallestSetReachingTheMass) {
  // probs 0.5, 0.25, 0.125, 0.125 (logits log2 scale): top_p 0.7 keeps {0, 1}.
  const std::vector<float> logits{std::log(4.0f), std::log(2.0f), 0.0f, 0.0f};
  Sampler s(params(1.0, -1, 0.7), 11);
  std::set<int32_t> seen;
  for (int i = 0; i < 2000; ++i) seen.insert(draw(s, logits));
  EXPECT_EQ(seen, (std::set<int32_t>{0, 1}));
  Sampler tiny(params(1.0, -1, 0.01), 11);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(draw(tiny, logits), 0);
}

TEST(Sampler, TopPOnAWideVocabularyOnlyEmitsTheNucleus) {
  const auto logits = random_logits(262144, 5, 2.0f);
  // The nucleus, computed with a full sort.
  std::vector<int32_t> order(logits.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  const float m = logits[order[0]];
  double z = 0;
  for (float l : logits) z += std::exp(l - m);
  std::set<int32_t> nucleus;
  double mass = 0;
  for (int32_t id : order) {
    if (!nucleus.empty() && mass >= 0.3 * z) break;
    nucleus.insert(id);
    mass += std::exp(logits[id] - m);
  }
  ASSERT_GT(nucleus.size(), 64u);  // exercises the widening of the sorted prefix
  Sampler s(params(1.0, -1, 0.3), 13);
  for (int i = 0; i < 300; ++i) ASSERT_TRUE(nucleus.count(draw(s, logits)));
}

TEST(Sampler, MinPDropsTokensBelowTheRelativeThreshold) {
  // p proportional to 8, 4, 2, 1: min_p 0.2 keeps ratios >= 0.2 -> {0, 1, 2} (1/8 < 0.2).
  const std::vector<float> logits{std::log(8.0f), std::log(4.0f), std::log(2.0f), 0.0f};
  Sampler s(params(1.0, -1, 1.0, 0.2), 17);
  std::set<int32_t> seen;
  for (int i = 0; i < 3000; ++i) seen.insert(draw(s, logits));
  EXPECT_EQ(seen, (std::set<int32_t>{0, 1, 2}));
  // Combined with top_k 2: the shorter prefix wins.
  Sampler s2(params(1.0, 2, 1.0, 0.2), 17);
  std::set<int32_t> seen2;
  for (int i = 0; i < 3000; ++i) seen2.insert(draw(s2, logits));
  EXPECT_EQ(seen2, (std::set<int32_t>{0, 1}));
}

TEST(Sampler, BannedTokensAreNeverChosen) {
  Sampler g(params(0.0), 1);
  std::vector<float> l{0, 9, 1};
  const int32_t banned[] = {1};
  EXPECT_EQ(g.sample(l, banned), 2);
  Sampler s(params(1.0), 1);
  for (int i = 0; i < 500; ++i) {
    std::vector<float> x{0, 9, 1};
    ASSERT_NE(s.sample(x, banned), 1);
  }
  std::vector<float> all_banned{1, 2};
  const int32_t both[] = {0, 1};
  EXPECT_THROW(s.sample(all_banned, both), Error);
}

TEST(Sampler, LogitBiasShiftsTheLogitsBeforeTheDraw) {
  SamplingParams p = params(0.0);
  p.logit_bias = {{2, 100.0f}};
  Sampler g(p, 1, 0);
  EXPECT_FALSE(g.greedy_fast_path_ok());  // the executor's argmax would not see the bias
  TokenLogprob lp;
  std::vector<float> l{0, 9, 1};
  EXPECT_EQ(g.sample(l, {}, &lp), 2);
  EXPECT_FLOAT_EQ(l[2], 101.0f);  // the bias is added, so logprobs reflect it
  EXPECT_NEAR(lp.logprob, 0.0f, 1e-6f);
  // -100 keeps the top token out of a sampled draw on a wide vocabulary (its logit falls
  // ~100 below every other).
  SamplingParams q = params(1.0);
  q.logit_bias = {{7, -100.0f}};
  Sampler s(q, 3);
  auto base = random_logits(1000, 11, 1.0f);
  base[7] = 5.0f;
  for (int i = 0; i < 300; ++i) ASSERT_NE(draw(s, base), 7);
}

TEST(Sampler, RepetitionPenaltyDividesPositiveAndMultipliesNegativeLogits) {
  SamplingParams p = params(0.0);
  p.repetition_penalty = 2.0;
  Sampler s(p, 1, 0);
  const int32_t prompt[] = {0, 2};
  s.add_prompt(prompt);
  EXPECT_FALSE(s.greedy_fast_path_ok());  // penalties change the argmax
  // 0: 3 -> 1.5 ; 1: 2 (untouched) ; 2: -1 -> -2
  std::vector<float> l{3.0f, 2.0f, -1.0f};
  TokenLogprob lp;
  EXPECT_EQ(s.sample(l, {}, &lp), 1);
  EXPECT_FLOAT_EQ(l[0], 1.5f);
  EXPECT_FLOAT_EQ(l[2], -2.0f);
  s.add_output(1);  // now token 1 is penalized as well
  std::vector<float> l2{3.0f, 2.0f, -1.0f};
  EXPECT_EQ(s.sample(l2), 0);
}

TEST(Sampler, FrequencyAndPresencePenaltiesCountOutputTokensOnly) {
  SamplingParams p = params(0.0);
  p.frequency_penalty = 0.5;
  p.presence_penalty = 1.0;
  Sampler s(p, 1);
  const int32_t prompt[] = {0};
  s.add_prompt(prompt);  // the prompt does not count for these penalties
  s.add_output(1);
  s.add_output(1);
  s.add_output(2);
  std::vector<float> l{5.0f, 5.0f, 5.0f, 0.0f};
  s.sample(l);
  EXPECT_FLOAT_EQ(l[0], 5.0f);
  EXPECT_FLOAT_EQ(l[1], 5.0f - 2 * 0.5f - 1.0f);
  EXPECT_FLOAT_EQ(l[2], 5.0f - 0.5f - 1.0f);
}

TEST(Sampler, LogprobsAreTheLogSoftmaxOfTheProcessedLogits) {
  const std::vector<float> raw{1.0f, 3.0f, 2.0f, -1.0f, 3.0f};
  const double t = 2.0;
  Sampler s(params(t), 3, 3);
  TokenLogprob lp;
  std::vector<float> l = raw;
  const int32_t tok = s.sample(l, {}, &lp);
  double z = 0;
  for (float x : raw) z += std::exp(x / t);
  EXPECT_EQ(lp.token, tok);
  EXPECT_NEAR(lp.logprob, raw[tok] / t - std::log(z), 1e-5);
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[0].first, 1);  // tie 1 / 4: lowest id first
  EXPECT_EQ(lp.top[1].first, 4);
  EXPECT_EQ(lp.top[2].first, 2);
  EXPECT_NEAR(lp.top[2].second, 2.0 / t - std::log(z), 1e-5);
  // Greedy reports temperature-1 logprobs.
  Sampler g(params(0.0), 3, 0);
  std::vector<float> l2 = raw;
  TokenLogprob glp;
  EXPECT_EQ(g.sample(l2, {}, &glp), 1);
  double z1 = 0;
  for (float x : raw) z1 += std::exp(x);
  EXPECT_NEAR(glp.logprob, 3.0 - std::log(z1), 1e-5);
  EXPECT_TRUE(glp.top.empty());
}

}  // namespace
}  // namespace kiln::engine
