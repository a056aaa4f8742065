// Prompt scoring (prompt logprobs) through the Engine over FakeModel: every score equals the
// log-softmax of the fake model's logits after that prefix, computed here without the engine,
// across scoring chunks, chunked prefill, prefix-cache hits, preemption and max_new_tokens 0.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "engine/engine_harness.h"

namespace kiln::engine {
namespace {

using testing::fake_logits;
using testing::Gate;
using testing::Harness;
using testing::history_hash;
using testing::kHistorySeed;
using testing::kVocab;
using testing::make_request;
using testing::Result;

// What the scores of positions max(from, 1).. must be: log-softmax in double of the logits
// FakeModel gives after each prefix, and the `top` best ids (lower id first on ties).
std::vector<TokenLogprob> expected_scores(const std::vector<int32_t>& prompt, int from, int top) {
  std::vector<TokenLogprob> out;
  if (from < 0) return out;
  std::vector<float> row(static_cast<size_t>(kVocab));
  uint64_t h = kHistorySeed;
  for (size_t p = 0; p + 1 < prompt.size(); ++p) {
    h = history_hash(h, prompt[p], static_cast<int32_t>(p));
    if (static_cast<int>(p + 1) < std::max(from, 1)) continue;
    fake_logits(h, kVocab, 2.0f, row.data());
    const double mx = *std::max_element(row.begin(), row.end());
    double z = 0;
    for (float l : row) z += std::exp(l - mx);
    const double log_z = mx + std::log(z);
    TokenLogprob lp;
    lp.token = prompt[p + 1];
    lp.logprob = static_cast<float>(row[static_cast<size_t>(lp.token)] - log_z);
    std::vector<int32_t> ids(static_cast<size_t>(kVocab));
    std::iota(ids.begin(), ids.end(), 0);
    std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
    for (int k = 0; k < top; ++k)
      lp.top.emplace_back(ids[static_cast<size_t>(k)],
                          static_cast<float>(row[static_cast<size_t>(ids[k])] - log_z));
    out.push_back(lp);
  }
  return out;
}

void expect_scores(const Result& got, const GenerateRequest& r) {
  const auto want = expected_scores(r.prompt_ids, r.prompt_logprobs_from, std::max(r.logprobs, 0));
  EXPECT_EQ(got.prompt_logprob_events, want.empty() ? 0 : 1);
  ASSERT_EQ(got.prompt_logprobs.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got.prompt_logprobs[i].token, want[i].token) << "position " << i;
    EXPECT_NEAR(got.prompt_logprobs[i].logprob, want[i].logprob, 1e-5) << "position " << i;
    ASSERT_EQ(got.prompt_logprobs[i].top.size(), want[i].top.size());
    for (size_t k = 0; k < want[i].top.size(); ++k) {
      EXPECT_EQ(got.prompt_logprobs[i].top[k].first, want[i].top[k].first);
      EXPECT_NEAR(got.prompt_logprobs[i].top[k].second, want[i].top[k].second, 1e-5);
    }
  }
}

GenerateRequest scoring_request(int prompt_len, uint64_t seed, int max_new, int from, int top) {
  GenerateRequest r = make_request(prompt_len, seed, max_new, 0.0);
  r.prompt_logprobs_from = from;
  r.logprobs = top;
  return r;
}

TEST(PromptScoring, EveryPositionAcrossScoringChunksAndTheOutputIsUnchanged) {
  Harness h;
  // 80 tokens: three scoring chunks (Scheduler::kScoringChunkRows = 32).
  const GenerateRequest r = scoring_request(80, 1, 5, 0, 3);
  const uint64_t id = h.submit(r);
  ASSERT_TRUE(h.collector.wait(1));
  h.expect_matches_reference(id);
  expect_scores(h.collector.get(id), r);
  h.expect_no_leak();
}

TEST(PromptScoring, StartPositionsAndOnlyTheChosenToken) {
  Harness h;
  std::vector<std::pair<uint64_t, GenerateRequest>> reqs;
  for (int from : {-1, 0, 1, 2, 33, 59, 60}) {
    GenerateRequest r = scoring_request(60, 2 + from, 3, from, from % 2 ? 0 : 2);
    reqs.emplace_back(h.submit(r), r);
  }
  ASSERT_TRUE(h.collector.wait(static_cast<int>(reqs.size())));
  for (auto& [id, r] : reqs) {
    h.expect_matches_reference(id);
    expect_scores(h.collector.get(id), r);
  }
  h.expect_no_leak();
}

TEST(PromptScoring, MaxNewTokensZeroScoresWithoutGenerating) {
  Harness h;
  const GenerateRequest r = scoring_request(45, 3, 0, 0, 1);
  const uint64_t id = h.submit(r);
  ASSERT_TRUE(h.collector.wait(1));
  const Result got = h.collector.get(id);
  EXPECT_TRUE(got.tokens.empty());
  EXPECT_EQ(got.reason, FinishReason::Length);
  EXPECT_EQ(got.finished_events, 1);
  expect_scores(got, r);
  h.expect_no_leak();
}

TEST(PromptScoring, PrefixCacheHitsNeverSkipARowThatScores) {
  Harness h;
  const GenerateRequest plain = make_request(70, 4, 2, 0.0);
  const uint64_t first = h.submit(plain);
  ASSERT_TRUE(h.collector.wait(1));
  h.expect_matches_reference(first);
  // The same prompt again: scoring from 0 must recompute everything, from 50 may reuse the
  // cached pages below row 49, and without scoring it reuses all but the last token.
  int done = 1;
  for (int from : {0, 50, -1}) {
    GenerateRequest r = plain;
    r.prompt_logprobs_from = from;
    r.logprobs = 2;
    const uint64_t id = h.submit(r);
    ASSERT_TRUE(h.collector.wait(++done));
    h.expect_matches_reference(id);
    const Result got = h.collector.get(id);
    expect_scores(got, r);
    if (from == 0) {
      EXPECT_EQ(got.cached_tokens, 0);
    }
    if (from == 50) {
      EXPECT_GT(got.cached_tokens, 0);
      EXPECT_LE(got.cached_tokens, 49);
    }
    if (from == -1) {
      EXPECT_GT(got.cached_tokens, 49);
    }
  }
  h.expect_no_leak();
}

TEST(PromptScoring, ChunkedPrefillAndPreemptionKeepEveryScoreOnce) {
  for (bool cache : {true, false}) {
    EngineConfig ec;
    ec.enable_prefix_cache = cache;
    ec.chunked_prefill_size = 8;
    Harness h({2, 1, 8, 4, 30}, ec);  // 120 tokens of KV; each request needs up to 70
    // All six are queued behind a held one-token step, so that several are admitted together
    // and preemption is certain (see Engine.PreemptionUnderATinyPoolFinishesEverythingIdentically).
    Gate gate;
    h.model.before_forward = [&](const StepBatch&) { gate.pass(); };
    h.submit(make_request(1, 9, 1, 0.0));
    gate.wait_entered(1);
    std::vector<std::pair<uint64_t, GenerateRequest>> reqs;
    for (int i = 0; i < 6; ++i) {
      GenerateRequest r = scoring_request(40, 10 + i, 30, i % 3, 2);
      reqs.emplace_back(h.submit(r), r);
    }
    gate.release();
    ASSERT_TRUE(h.collector.wait(7));
    for (auto& [id, r] : reqs) {
      h.expect_matches_reference(id);
      expect_scores(h.collector.get(id), r);
    }
    EXPECT_GT(h.engine->stats().preemptions, 0) << "cache " << cache;
    h.expect_no_leak();
  }
}

TEST(PromptScoring, AStartPastThePromptIsRejected) {
  Harness h;
  GenerateRequest r = scoring_request(10, 5, 2, 11, 0);
  EXPECT_THROW(h.engine->submit(r, h.collector.callback()), Error);
  r.prompt_logprobs_from = -2;
  EXPECT_THROW(h.engine->submit(r, h.collector.callback()), Error);
}

}  // namespace
}  // namespace kiln::engine
