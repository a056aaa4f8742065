// The speculation unit on its own, with fake step costs (given, or recorded as measurements):
// budgets, the policy's cap and its every-16th-step override, acceptance and backoff, the
// n-gram proposer. Sequences are built by hand; nothing runs a model.
#include "kiln/engine/speculation.h"

#include <gtest/gtest.h>

#include "engine/fake_model.h"
#include "kiln/base/error.h"

namespace kiln::engine {
namespace {

using testing::FakeTokenizer;

const std::vector<int32_t> kEog = {FakeTokenizer::kEos};

SpeculativeConfig ngram(int k = 4) {
  SpeculativeConfig c;
  c.ngram = true;
  c.num_draft_tokens = k;
  return c;
}

SpeculativeResources fixed_cost(std::function<double(int64_t)> cost) {
  SpeculativeResources r;
  r.step_cost = std::move(cost);
  return r;
}

double flat(int64_t) { return 1.0; }
double linear(int64_t rows) { return static_cast<double>(rows); }

struct Seqs {
  FakeTokenizer tok;
  std::vector<std::unique_ptr<Sequence>> owned;
  Sequence& add(std::vector<int32_t> prompt, int max_new) {
    GenerateRequest r;
    r.prompt_ids = std::move(prompt);
    r.stop.max_new_tokens = max_new;
    owned.push_back(std::make_unique<Sequence>(owned.size() + 1, owned.size(), std::move(r),
                                               nullptr, 1, tok, kEog));
    return *owned.back();
  }
};

TEST(Speculation, BudgetsAreTheSmallestOfTheLimitsAndSkipStepsAfterMisses) {
  Seqs s;
  Speculation spec(ngram(4), fixed_cost(flat), 512);
  Sequence& seq = s.add({5, 6, 7}, 10);
  EXPECT_EQ(spec.budget(seq), 4);  // num_draft_tokens
  seq.spec.limit = 2;
  EXPECT_EQ(spec.budget(seq), 2);  // the request's own limit
  seq.spec.limit = 16;
  seq.tokens.insert(seq.tokens.end(), {1, 1, 1, 1, 1, 1, 1});  // 3 tokens left to generate
  EXPECT_EQ(spec.budget(seq), 2);  // the last one comes from the model for free
  seq.spec.skip = 2;
  EXPECT_EQ(spec.budget(seq), 0);
  EXPECT_EQ(spec.budget(seq), 0);
  EXPECT_EQ(spec.budget(seq), 2);
}

TEST(Speculation, MissesBackOffAndHitsGrowTheLimit) {
  Seqs s;
  Speculation spec(ngram(4), fixed_cost(flat), 512);
  Sequence& seq = s.add({5, 6, 7}, 100);
  const int skips[] = {1, 3, 7, 7};
  const int limits[] = {8, 4, 2, 1};
  for (int miss = 0; miss < 4; ++miss) {
    spec.record_verify(seq, 4, 0);
    EXPECT_EQ(seq.spec.skip, skips[miss]) << miss;
    EXPECT_EQ(seq.spec.limit, limits[miss]) << miss;
  }
  spec.record_verify(seq, 1, 1);  // all kept: doubled, the misses forgotten
  EXPECT_EQ(seq.spec.limit, 2);
  EXPECT_EQ(seq.spec.misses, 0);
  spec.record_verify(seq, 4, 2);  // some kept: one more than were
  EXPECT_EQ(seq.spec.limit, 3);
  for (int i = 0; i < 5; ++i) spec.record_verify(seq, seq.spec.limit, seq.spec.limit);
  EXPECT_EQ(seq.spec.limit, SpeculativeConfig::kMaxDraftTokens);
}

TEST(Speculation, AcceptanceIsCountedPerRequestAndForTheEngine) {
  Seqs s;
  Speculation spec(ngram(4), fixed_cost(flat), 512);
  Sequence& a = s.add({5}, 100);
  Sequence& b = s.add({6}, 100);
  spec.record_verify(a, 4, 3);
  spec.record_verify(b, 2, 0);
  EXPECT_EQ(a.spec.verify_ct, 1);
  EXPECT_EQ(a.spec.proposed, 4);
  EXPECT_EQ(a.spec.accepted, 3);
  EXPECT_EQ(a.spec.runs.first_hits, 1);
  EXPECT_EQ(a.spec.runs.next_trials, 3);  // proposals 2..4 after a kept one: 3 trials, 2 hits
  EXPECT_EQ(a.spec.runs.next_hits, 2);
  EXPECT_EQ(spec.runs().rounds, 2);
  EXPECT_EQ(spec.runs().first_hits, 1);
}

TEST(Speculation, FakeCostsDecideTheCap) {
  Seqs s;
  Sequence& seq = s.add({5, 6, 7}, 100);
  std::vector<Sequence*> one = {&seq};
  std::vector<int64_t> budgets = {8};
  // Rows that cost nothing extra: all proposals; rows that cost in proportion: none.
  Speculation free_rows(ngram(8), fixed_cost(flat), 512);
  EXPECT_EQ(free_rows.cap(one, budgets, 0), 8);
  EXPECT_EQ(budgets[0], 8);
  Speculation paid_rows(ngram(8), fixed_cost(linear), 512);
  for (int step = 1; step <= 40; ++step) {
    budgets = {8};
    EXPECT_EQ(paid_rows.cap(one, budgets, 0), 0) << step;  // given costs: never overridden
    EXPECT_EQ(budgets[0], 0);
  }
}

TEST(Speculation, EverySixteenthCappedStepTakesEveryProposalToMeasureAgain) {
  Seqs s;
  Sequence& seq = s.add({5, 6, 7}, 100);
  std::vector<Sequence*> one = {&seq};
  Speculation spec(ngram(8), SpeculativeResources{}, 512);
  // Measured steps whose time grows with their rows: proposals do not pay.
  for (int64_t rows = 1; rows <= 9; ++rows) spec.record_step(rows, static_cast<double>(rows));
  for (int step = 1; step <= 2 * Speculation::kRemeasureEvery; ++step) {
    std::vector<int64_t> budgets = {8};
    const bool remeasure = step % Speculation::kRemeasureEvery == 0;
    EXPECT_EQ(spec.cap(one, budgets, 0), remeasure ? 8 : 0) << step;
  }
}

TEST(Speculation, ProposalsComeFromTheRequestsOwnTokens) {
  Seqs s;
  Speculation spec(ngram(3), fixed_cost(flat), 512);
  // "5 6 7 8 5 6": the suffix "5 6" was followed by "7 8 5".
  Sequence& repeats = s.add({5, 6, 7, 8, 5, 6}, 100);
  Sequence& skipping = s.add({5, 6, 7, 8, 5, 6}, 100);
  skipping.spec.skip = 1;
  skipping.spec.draft = {9};  // last step's proposals are cleared
  spec.propose({&repeats, &skipping});
  EXPECT_EQ(repeats.spec.draft, (std::vector<int32_t>{7, 8, 5}));
  EXPECT_TRUE(skipping.spec.draft.empty());
  EXPECT_EQ(skipping.spec.skip, 0);
}

TEST(Speculation, SpeculatesOnlyUpToItsBatch) {
  SpeculativeConfig c = ngram();
  c.max_batch = 2;
  Speculation spec(c, {}, 512);
  EXPECT_TRUE(spec.speculates(2));
  EXPECT_FALSE(spec.speculates(3));
  Speculation off(SpeculativeConfig{}, {}, 512);
  EXPECT_FALSE(off.enabled());
  EXPECT_FALSE(off.speculates(1));
}

TEST(Speculation, RefusesWhatItCannotRun) {
  SpeculativeConfig both = ngram();
  both.draft_model = true;
  EXPECT_THROW(Speculation(both, {}, 512), Error);
  SpeculativeConfig draft;
  draft.draft_model = true;
  EXPECT_THROW(Speculation(draft, {}, 512), Error);  // no draft model given
  SpeculativeConfig too_many = ngram(SpeculativeConfig::kMaxDraftTokens + 1);
  EXPECT_THROW(Speculation(too_many, {}, 512), Error);
}

}  // namespace
}  // namespace kiln::engine
