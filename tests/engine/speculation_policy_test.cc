// The speculation policy: the step cost model interpolates what it measured, and the proposal
// cap follows the cost of rows: everything on a flat (memory-bound) cost, nothing on a cost
// linear in rows, on at batch 1 and off at batch 8 on a cost that is flat up to 8 rows and
// linear beyond (a memory-bound step turning compute bound), off when drafting costs more than
// it gives. Through the scheduler, a fake cost model turns speculation off where it loses and
// the output stays plain decoding's.
#include "kiln/engine/speculation_policy.h"

#include <gtest/gtest.h>

#include <vector>

#include "engine/engine_harness.h"
#include "kiln/engine/scheduler.h"

namespace kiln::engine {
namespace {

using testing::FakeModel;
using testing::FakeTokenizer;
using testing::kVocab;
using testing::make_request;

double flat(int64_t) { return 1.0; }
double linear(int64_t rows) { return static_cast<double>(rows); }
double memory_then_compute(int64_t rows) { return std::max(1.0, static_cast<double>(rows) / 8.0); }

TEST(StepCostModel, InterpolatesBetweenMeasuredSizesAndIsFlatBeyond) {
  StepCostModel m;
  EXPECT_FALSE(m.estimate(4).has_value());
  m.record(2, 1.0);
  m.record(10, 3.0);
  EXPECT_DOUBLE_EQ(*m.estimate(2), 1.0);
  EXPECT_DOUBLE_EQ(*m.estimate(6), 2.0);
  EXPECT_DOUBLE_EQ(*m.estimate(1), 1.0);
  EXPECT_DOUBLE_EQ(*m.estimate(40), 3.0);
  // The fastest of the recent steps: a slow one does not raise it, and once the fast one is
  // kWindow steps old a slower host shows.
  m.record(2, 2.0);
  EXPECT_DOUBLE_EQ(*m.estimate(2), 1.0);
  for (size_t i = 1; i < StepCostModel::kWindow; ++i) m.record(2, 1.5);
  EXPECT_DOUBLE_EQ(*m.estimate(2), 1.5);
}

TEST(SpeculationPolicy, ExpectedTokens) {
  EXPECT_DOUBLE_EQ(expected_tokens(0.0, 0.0, 4), 1.0);
  EXPECT_DOUBLE_EQ(expected_tokens(1.0, 1.0, 4), 5.0);
  EXPECT_NEAR(expected_tokens(0.5, 0.5, 2), 1.75, 1e-12);  // one rate: 1 + a + a^2
  EXPECT_NEAR(expected_tokens(0.5, 1.0, 4), 3.0, 1e-12);   // half the time, a run of 4
}

TEST(SpeculationPolicy, TheCapFollowsTheCostOfRows) {
  const std::vector<SpeculationCandidate> one = {{8, 0.7, 0.7}};
  EXPECT_EQ(choose_proposal_cap(one, 0, flat, 0.0), 8);
  EXPECT_EQ(choose_proposal_cap(one, 0, linear, 0.0), 0);
  // Batch 1: 4 proposals stay within the flat part (2.77 tokens per unit of time); 8 cost
  // 9/8 and give 3.20 tokens (2.84 per unit): worth it.
  EXPECT_EQ(choose_proposal_cap(one, 0, memory_then_compute, 0.0), 8);
  // At acceptance 0.3 the rows past the flat part are not: 1.43 tokens per unit with 4, 1.27
  // with 8.
  EXPECT_EQ(choose_proposal_cap(std::vector<SpeculationCandidate>{{8, 0.3, 0.3}}, 0,
                                memory_then_compute, 0.0),
            4);
  // Batch 8 (one candidate, 7 plain rows): every proposal row is paid in full.
  EXPECT_EQ(choose_proposal_cap(one, 7, memory_then_compute, 0.0), 0);
  const std::vector<SpeculationCandidate> eight(8, {8, 0.7, 0.7});
  EXPECT_EQ(choose_proposal_cap(eight, 0, memory_then_compute, 0.0), 0);
  // A draft step costing half a target step: 8 proposals at acceptance 0.3 do not pay for
  // themselves; at 0.95 they do.
  EXPECT_EQ(choose_proposal_cap(std::vector<SpeculationCandidate>{{8, 0.3, 0.3}}, 0, flat, 0.5), 0);
  EXPECT_GT(choose_proposal_cap(std::vector<SpeculationCandidate>{{8, 0.95, 0.95}}, 0, flat, 0.5),
            0);
  // Runs: the first proposal kept 60% of the time, then 95% while the run lasts: 8 proposals
  // give 4.98 tokens for 9/8 of a step, 4 give 3.23 for one step.
  const std::vector<SpeculationCandidate> runs = {{8, 0.6, 0.95}};
  EXPECT_EQ(choose_proposal_cap(runs, 0, memory_then_compute, 0.0), 8);
  // A cost that jumps past 5 rows: a run-keeping request still takes 8, one with a single rate
  // of 0.6 stops at 4.
  const auto jump = [](int64_t rows) { return rows <= 5 ? 1.0 : 1.5; };
  EXPECT_EQ(choose_proposal_cap(runs, 0, jump, 0.0), 8);
  EXPECT_EQ(choose_proposal_cap(std::vector<SpeculationCandidate>{{8, 0.6, 0.6}}, 0, jump, 0.0), 4);
}

struct PolicyRun {
  std::map<uint64_t, std::vector<int32_t>> tokens;
  EngineStats stats;
};

PolicyRun run(int n, std::function<double(int64_t)> cost) {
  KvPool pool({2, 1, 8, 4, 512});
  FakeModel model(pool, kVocab);
  model.markov = true;  // greedy output cycles: n-gram proposals are there to be made
  FakeTokenizer tok(kVocab);
  EngineConfig ec;
  SpeculativeResources resources;
  if (cost) {
    ec.speculative.ngram = true;
    ec.speculative.num_draft_tokens = 8;
    ec.speculative.max_batch = 8;
    resources.step_cost = std::move(cost);
  }
  Scheduler sched(model, pool, tok, ec, resources);
  PolicyRun out;
  std::vector<GenerateRequest> requests;
  for (int i = 1; i <= n; ++i) requests.push_back(make_request(3 + 2 * i, 50 + i, 60, 0.0));
  testing::run_to_completion(sched, requests, [&out](const RequestEvent& e) {
    auto& t = out.tokens[e.request_id];
    t.insert(t.end(), e.new_tokens.begin(), e.new_tokens.end());
  });
  out.stats = sched.stats();
  return out;
}

TEST(SpeculationPolicy, AFakeCostModelTurnsSpeculationOffWhereItLoses) {
  const PolicyRun plain1 = run(1, nullptr), plain8 = run(8, nullptr);
  // Rows cost in proportion: never worth it.
  const PolicyRun linear1 = run(1, linear);
  EXPECT_EQ(linear1.stats.spec_verify_steps, 0);
  EXPECT_EQ(linear1.tokens, plain1.tokens);
  // Memory bound up to 8 rows: batch 1 speculates, a batch of 8 does not.
  const PolicyRun mixed1 = run(1, memory_then_compute);
  EXPECT_GT(mixed1.stats.spec_accepted_tokens, 0);
  EXPECT_EQ(mixed1.tokens, plain1.tokens);
  const PolicyRun mixed8 = run(8, memory_then_compute);
  EXPECT_EQ(mixed8.stats.spec_verify_steps, 0);
  EXPECT_EQ(mixed8.tokens, plain8.tokens);
}

}  // namespace
}  // namespace kiln::engine
