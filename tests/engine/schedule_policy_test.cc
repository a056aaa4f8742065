// The schedule policies (schedule_policy.h): the admission order on its own, then on the engine
// harness (the Scheduler over FakeModel, stepped directly, so which request is admitted when is
// exact). With one running request at a time and short generations, the order of the requests'
// first events is the order in which they were admitted.
#include "kiln/engine/schedule_policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "engine/engine_harness.h"
#include "kiln/base/error.h"
#include "kiln/engine/scheduler.h"

namespace kiln::engine {
namespace {

using testing::FakeModel;
using testing::FakeTokenizer;
using testing::Generation;
using testing::kVocab;
using testing::make_request;
using testing::reference_generate;

// ---- the order alone ---------------------------------------------------------------------

std::vector<ScheduleTicket> tickets(const std::vector<int32_t>& priorities) {
  std::vector<ScheduleTicket> out;
  for (size_t i = 0; i < priorities.size(); ++i)
    out.push_back({.arrival = i, .priority = priorities[i]});
  return out;
}

std::vector<size_t> order_of(const ScheduleConfig& config, const std::vector<ScheduleTicket>& t,
                             const std::vector<int64_t>& cached = {}) {
  return admission_order(config, t, [&](size_t i) { return cached.empty() ? 0 : cached[i]; });
}

TEST(SchedulePolicyOrder, FcfsIsArrivalOrderAndNeverLooksAtTheCache) {
  ScheduleConfig fcfs{.policy = SchedulePolicy::kFcfs};
  bool matched = false;
  const auto order = admission_order(fcfs, tickets({0, 0, 0, 0}), [&](size_t) {
    matched = true;
    return int64_t{0};
  });
  EXPECT_EQ(order, (std::vector<size_t>{0, 1, 2, 3}));
  EXPECT_FALSE(matched);
}

TEST(SchedulePolicyOrder, LpmOrdersByCachedTokensThenArrival) {
  ScheduleConfig lpm{.policy = SchedulePolicy::kLpm};
  EXPECT_EQ(order_of(lpm, tickets({0, 0, 0, 0, 0}), {0, 16, 4, 16, 0}),
            (std::vector<size_t>{1, 3, 2, 0, 4}));
}

TEST(SchedulePolicyOrder, HigherPriorityFirstUnderBothPolicies) {
  for (SchedulePolicy p : {SchedulePolicy::kFcfs, SchedulePolicy::kLpm}) {
    SCOPED_TRACE(schedule_policy_name(p));
    ScheduleConfig config{.policy = p};
    // Priority comes before the cached prefix: request 3 has the longest one.
    EXPECT_EQ(order_of(config, tickets({0, 5, 5, -1, 10}), {0, 0, 8, 64, 0}),
              (std::vector<size_t>{4, p == SchedulePolicy::kLpm ? 2u : 1u,
                                   p == SchedulePolicy::kLpm ? 1u : 2u, 0, 3}));
  }
}

TEST(SchedulePolicyOrder, RequestsOvertakenTooOftenGoFirstByArrival) {
  ScheduleConfig lpm{.policy = SchedulePolicy::kLpm, .max_times_overtaken = 3};
  auto t = tickets({0, -7, 9, -2});
  t[1].times_overtaken = 3;
  t[3].times_overtaken = 5;
  EXPECT_EQ(order_of(lpm, t, {0, 0, 0, 0}), (std::vector<size_t>{1, 3, 2, 0}));
}

TEST(SchedulePolicyOrder, LpmMatchesOnlyTheCandidatesNearestTheFront) {
  ScheduleConfig lpm{.policy = SchedulePolicy::kLpm, .max_lpm_candidates = 2};
  std::vector<size_t> asked;
  const auto order = admission_order(lpm, tickets({0, 0, 0, 1}), [&](size_t i) {
    asked.push_back(i);
    return int64_t{i == 1 ? 8 : 32};
  });
  // Request 3 comes first by priority; of the rest only request 0 is matched, and the others
  // stay behind it whatever they would match.
  std::sort(asked.begin(), asked.end());
  EXPECT_EQ(asked, (std::vector<size_t>{0, 3}));
  EXPECT_EQ(order, (std::vector<size_t>{3, 0, 1, 2}));
}

TEST(SchedulePolicyOrder, OvertakingCountsOnlyForEarlierArrivals) {
  ScheduleTicket admitted{.arrival = 5, .priority = 3};
  ScheduleTicket older{.arrival = 2}, newer{.arrival = 7};
  count_overtaken(admitted, older);
  count_overtaken(admitted, newer);
  EXPECT_EQ(older.times_overtaken, 1);
  EXPECT_EQ(newer.times_overtaken, 0);
}

TEST(SchedulePolicyOrder, PreemptionProtectsHigherPriorityThenOlderRequests) {
  EXPECT_TRUE(protected_before({.arrival = 1}, {.arrival = 2}));
  EXPECT_FALSE(protected_before({.arrival = 2}, {.arrival = 1}));
  EXPECT_TRUE(protected_before({.arrival = 9, .priority = 1}, {.arrival = 1, .priority = 0}));
}

TEST(SchedulePolicyOrder, ParsesPolicyNames) {
  EXPECT_EQ(parse_schedule_policy("lpm"), SchedulePolicy::kLpm);
  EXPECT_EQ(parse_schedule_policy("fcfs"), SchedulePolicy::kFcfs);
  for (const char* bad : {"LPM", "random", "", "dfs-weight"}) {
    try {
      parse_schedule_policy(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("expected lpm or fcfs"), std::string::npos) << e.what();
    }
  }
  EXPECT_STREQ(schedule_policy_name(SchedulePolicy::kLpm), "lpm");
  EXPECT_STREQ(schedule_policy_name(SchedulePolicy::kFcfs), "fcfs");
}

TEST(SchedulePolicyOrder, RejectsAZeroBound) {
  EXPECT_THROW(validate(ScheduleConfig{.max_times_overtaken = 0}), Error);
  EXPECT_THROW(validate(ScheduleConfig{.max_lpm_candidates = -1}), Error);
  EXPECT_NO_THROW(validate(ScheduleConfig{}));
}

// ---- on the engine harness ---------------------------------------------------------------

// A Scheduler over FakeModel that records, per request, its tokens and when it started and
// finished (the order of its first and last events).
struct PolicyRun {
  explicit PolicyRun(const EngineConfig& ec, const KvPoolConfig& pc = {2, 1, 8, 4, 256})
      : pool(pc), model(pool, kVocab), sched(model, pool, tok, ec) {}
  ~PolicyRun() { EXPECT_TRUE(model.errors_copy().empty()) << model.errors_copy().front(); }

  uint64_t add(const GenerateRequest& r) {
    const uint64_t id = next_id++;
    requests[id] = r;
    sched.add(
        id, r, [this](const RequestEvent& e) { on_event(e); }, id);
    return id;
  }
  void run_until_idle() {
    for (int guard = 0; !sched.idle() && guard < 100000; ++guard) sched.step();
    ASSERT_TRUE(sched.idle());
  }
  bool has_started(uint64_t id) const {
    return std::find(started.begin(), started.end(), id) != started.end();
  }
  // Every request's output is what it gives alone, whatever the order it ran in.
  void expect_outputs_match_the_reference() {
    for (const auto& [id, r] : requests) {
      const Generation ref = reference_generate(r, *r.sampling.seed, tok, kVocab);
      EXPECT_EQ(tokens[id], ref.tokens) << "request " << id;
    }
  }

  KvPool pool;
  FakeModel model;
  FakeTokenizer tok{kVocab};
  Scheduler sched;
  uint64_t next_id = 1;
  std::map<uint64_t, GenerateRequest> requests;
  std::map<uint64_t, std::vector<int32_t>> tokens;
  std::map<uint64_t, int> cached_tokens;
  std::vector<uint64_t> started, finished;

 private:
  void on_event(const RequestEvent& e) {
    EXPECT_TRUE(e.error.empty()) << e.error;
    if (!has_started(e.request_id)) started.push_back(e.request_id);
    auto& t = tokens[e.request_id];
    t.insert(t.end(), e.new_tokens.begin(), e.new_tokens.end());
    cached_tokens[e.request_id] = e.cached_tokens;
    if (e.finished) finished.push_back(e.request_id);
  }
};

EngineConfig one_at_a_time(SchedulePolicy policy) {
  EngineConfig ec;
  ec.max_running_requests = 1;
  ec.schedule.policy = policy;
  return ec;
}

GenerateRequest with_priority(GenerateRequest r, int32_t priority) {
  r.priority = priority;
  return r;
}

// A prompt that starts with `n` tokens of `prefix` and goes on with `extra` tokens of its own.
GenerateRequest sharing_prefix(const GenerateRequest& prefix, int n, int extra, uint64_t seed) {
  GenerateRequest r = make_request(extra, seed, 2, 0.0);
  // Built in a new vector: GCC 12 warns (-Wstringop-overread, a false positive) on the
  // insert at the front once GenerateRequest grows.
  std::vector<int32_t> ids(prefix.prompt_ids.begin(), prefix.prompt_ids.begin() + n);
  ids.insert(ids.end(), r.prompt_ids.begin(), r.prompt_ids.end());
  r.prompt_ids = std::move(ids);
  return r;
}

class Policies : public ::testing::TestWithParam<SchedulePolicy> {};

TEST_P(Policies, NothingCachedIsArrivalOrder) {
  PolicyRun run(one_at_a_time(GetParam()));
  for (int i = 0; i < 4; ++i) run.add(make_request(9 + i, 10 + i, 3, i % 2 ? 0.7 : 0.0));
  ASSERT_NO_FATAL_FAILURE(run.run_until_idle());
  EXPECT_EQ(run.started, (std::vector<uint64_t>{1, 2, 3, 4}));
  run.expect_outputs_match_the_reference();
}

// Two prompts are cached (a long and a short one); then three requests arrive: one that
// matches nothing, one that shares the short prompt's first 16 tokens, one that shares the long
// prompt's first 36. fcfs runs them as they came, lpm longest match first.
TEST_P(Policies, LpmAdmitsTheLongestCachedPrefixFirstAndFcfsByArrival) {
  PolicyRun run(one_at_a_time(GetParam()));
  const GenerateRequest long_prompt = make_request(40, 1, 2, 0.0);
  const GenerateRequest short_prompt = make_request(20, 2, 2, 0.0);
  run.add(long_prompt);
  run.add(short_prompt);
  ASSERT_NO_FATAL_FAILURE(run.run_until_idle());
  const uint64_t none = run.add(make_request(30, 3, 2, 0.0));
  const uint64_t some = run.add(sharing_prefix(short_prompt, 16, 10, 4));
  const uint64_t most = run.add(sharing_prefix(long_prompt, 36, 4, 5));
  ASSERT_NO_FATAL_FAILURE(run.run_until_idle());
  const std::vector<uint64_t> later(run.started.begin() + 2, run.started.end());
  if (GetParam() == SchedulePolicy::kLpm) {
    EXPECT_EQ(later, (std::vector<uint64_t>{most, some, none}));
  } else {
    EXPECT_EQ(later, (std::vector<uint64_t>{none, some, most}));
  }
  EXPECT_EQ(run.cached_tokens[most], 36);
  EXPECT_EQ(run.cached_tokens[some], 16);
  EXPECT_EQ(run.cached_tokens[none], 0);
  run.expect_outputs_match_the_reference();
}

TEST_P(Policies, HigherPriorityIsAdmittedFirstThenArrival) {
  PolicyRun run(one_at_a_time(GetParam()));
  const std::vector<int32_t> priorities = {0, 5, -3, 5, 10};
  for (size_t i = 0; i < priorities.size(); ++i) {
    run.add(with_priority(make_request(6, 20 + i, 3, 0.5), priorities[i]));
  }
  ASSERT_NO_FATAL_FAILURE(run.run_until_idle());
  EXPECT_EQ(run.started, (std::vector<uint64_t>{5, 2, 4, 1, 3}));
  run.expect_outputs_match_the_reference();
}

// The lowest priority request arrives first; then there are always two higher priority
// requests waiting. It is admitted after exactly max_times_overtaken of them, and without the
// bound (a huge one) it would still be waiting after 50.
TEST_P(Policies, TheLowestPriorityWaitsForABoundedNumberOfAdmissions) {
  for (int64_t bound : {int64_t{5}, int64_t{1} << 40}) {
    SCOPED_TRACE("bound " + std::to_string(bound));
    EngineConfig ec = one_at_a_time(GetParam());
    ec.schedule.max_times_overtaken = bound;
    PolicyRun run(ec);
    const uint64_t low = run.add(with_priority(make_request(5, 30, 1, 0.0), -100));
    int waiting_high = 0;
    for (int step = 0; step < 50 && !run.has_started(low); ++step) {
      for (; waiting_high < 2; ++waiting_high) {
        run.add(with_priority(make_request(5, 31 + run.next_id, 1, 0.0), 100));
      }
      const size_t before = run.started.size();
      run.sched.step();
      waiting_high -= static_cast<int>(run.started.size() - before);
    }
    if (bound == 5) {
      ASSERT_TRUE(run.has_started(low));
      EXPECT_EQ(run.started.size(), 6u);  // five high priority requests, then the low one
      EXPECT_EQ(run.started.back(), low);
    } else {
      EXPECT_FALSE(run.has_started(low));
      EXPECT_EQ(run.started.size(), 50u);
    }
    ASSERT_NO_FATAL_FAILURE(run.run_until_idle());
    run.expect_outputs_match_the_reference();
  }
}

INSTANTIATE_TEST_SUITE_P(Fcfs, Policies, ::testing::Values(SchedulePolicy::kFcfs),
                         [](const auto&) { return std::string("fcfs"); });
INSTANTIATE_TEST_SUITE_P(Lpm, Policies, ::testing::Values(SchedulePolicy::kLpm),
                         [](const auto&) { return std::string("lpm"); });

// lpm keeps serving cached prompts while they come, but a request that matches nothing waits
// for at most max_times_overtaken of them.
TEST(SchedulePolicyEngine, LpmWaitIsBoundedForAnUncachedPrompt) {
  EngineConfig ec = one_at_a_time(SchedulePolicy::kLpm);
  ec.schedule.max_times_overtaken = 3;
  PolicyRun run(ec);
  const GenerateRequest shared = make_request(32, 40, 1, 0.0);
  run.add(shared);
  ASSERT_NO_FATAL_FAILURE(run.run_until_idle());
  const uint64_t uncached = run.add(make_request(20, 41, 1, 0.0));
  for (int step = 0; step < 20 && !run.has_started(uncached); ++step) {
    run.add(sharing_prefix(shared, 28, 3, 42 + run.next_id));
    run.sched.step();
  }
  ASSERT_TRUE(run.has_started(uncached));
  EXPECT_EQ(run.started.size(), 5u);  // the first, three cached ones, then the uncached one
  EXPECT_EQ(run.started.back(), uncached);
  ASSERT_NO_FATAL_FAILURE(run.run_until_idle());
  run.expect_outputs_match_the_reference();
}

// The workload lpm is for: eight groups of requests share a system prompt each, arriving in
// turns, with a pool that holds the pages of the running requests and about two more prompts.
// fcfs runs the groups in turn, so every prompt is evicted before its group comes back; lpm
// runs the groups whose prompt is cached first.
TEST(SchedulePolicyEngine, LpmRaisesTheHitRateWhenThePrefixesDoNotAllFit) {
  std::map<SchedulePolicy, int64_t> hits;
  for (SchedulePolicy policy : {SchedulePolicy::kFcfs, SchedulePolicy::kLpm}) {
    SCOPED_TRACE(schedule_policy_name(policy));
    EngineConfig ec;
    ec.max_running_requests = 2;
    ec.schedule.policy = policy;
    PolicyRun run(ec, {2, 1, 8, 4, 36});  // 144 tokens; a request needs 40
    std::vector<GenerateRequest> prompts;
    for (int g = 0; g < 8; ++g) prompts.push_back(make_request(32, 60 + g, 1, 0.0));
    for (int i = 0; i < 32; ++i) {
      GenerateRequest r = sharing_prefix(prompts[i % 8], 32, 4, 70 + i);
      r.stop.max_new_tokens = 4;
      run.add(r);
    }
    ASSERT_NO_FATAL_FAILURE(run.run_until_idle());
    run.expect_outputs_match_the_reference();
    hits[policy] = run.sched.stats().prefix_cache_hit_tokens;
  }
  // lpm reaches the best there is: every request but its group's first finds the group's 32
  // tokens. fcfs finds none (0 when written).
  EXPECT_EQ(hits[SchedulePolicy::kLpm], 24 * 32);
  EXPECT_LE(hits[SchedulePolicy::kFcfs], 4 * 32);
}

// Two requests outgrow a small pool together: the lower priority one is preempted although it
// is the older (with equal priorities the younger would be), so the other finishes first.
TEST(SchedulePolicyEngine, TheLowerPriorityRequestIsPreemptedFirst) {
  for (bool prioritized : {false, true}) {
    SCOPED_TRACE(prioritized ? "second has priority" : "equal priorities");
    PolicyRun run(EngineConfig{}, {2, 1, 8, 4, 16});  // 64 tokens; each request needs 48
    const uint64_t first = run.add(make_request(8, 50, 40, 0.0));
    const uint64_t second =
        run.add(with_priority(make_request(8, 51, 40, 0.8), prioritized ? 1 : 0));
    ASSERT_NO_FATAL_FAILURE(run.run_until_idle());
    EXPECT_GT(run.sched.stats().preemptions, 0);
    const std::vector<uint64_t> first_to_finish =
        prioritized ? std::vector<uint64_t>{second, first} : std::vector<uint64_t>{first, second};
    EXPECT_EQ(run.finished, first_to_finish);
    run.expect_outputs_match_the_reference();
  }
}

}  // namespace
}  // namespace kiln::engine
