// Speculative decoding with n-gram proposals, through the scheduler over FakeModel (whose KV
// bookkeeping catches a stale or missing row): greedy output equals plain decoding token for
// token, with batches, stop strings, sampled and logprob requests beside greedy ones,
// preemption in a tiny pool and prefix-cache reuse; rejected rows leave no pages behind and
// no trace in the prefix cache; speculation stays off above its batch limit.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <vector>

#include "engine/engine_harness.h"
#include "kiln/engine/scheduler.h"

namespace kiln::engine {
namespace {

using testing::FakeModel;
using testing::FakeTokenizer;
using testing::kVocab;
using testing::make_request;

struct Outcome {
  std::map<uint64_t, std::vector<int32_t>> tokens;
  std::map<uint64_t, std::string> text;
  std::map<uint64_t, RequestEvent> last;  // the final event
  std::map<uint64_t, std::vector<TokenLogprob>> logprobs;
  EngineStats stats;
  int64_t steps = 0;
  int64_t max_rows = 0;
};

SpeculativeConfig ngram(int k = 4, int max_batch = 4) {
  SpeculativeConfig s;
  s.ngram = true;
  s.num_draft_tokens = k;
  s.max_batch = max_batch;
  return s;
}

// Every step costs the same whatever its rows: the policy never caps proposals, so these tests
// see the mechanism at work (the policy has tests of its own, with other costs).
SpeculativeResources flat_costs() {
  SpeculativeResources r;
  r.step_cost = [](int64_t) { return 1.0; };
  return r;
}

// Runs `requests` (all queued up front, ids 1..n) to the end; `markov` makes greedy output
// cycle, so proposals get accepted. Checks that nothing leaks.
Outcome run(const std::vector<GenerateRequest>& requests, const SpeculativeConfig& spec,
            bool markov = true, KvPoolConfig pc = {2, 1, 8, 4, 256}, EngineConfig ec = {}) {
  KvPool pool(pc);
  FakeModel model(pool, kVocab);
  model.markov = markov;
  FakeTokenizer tok(kVocab);
  ec.speculative = spec;
  ec.random_seed = 1;
  Outcome out;
  {
    Scheduler sched(model, pool, tok, ec, flat_costs());
    auto on_event = [&out](const RequestEvent& e) {
      EXPECT_TRUE(e.error.empty()) << e.error;
      auto& t = out.tokens[e.request_id];
      t.insert(t.end(), e.new_tokens.begin(), e.new_tokens.end());
      out.text[e.request_id] += e.text_delta;
      auto& lp = out.logprobs[e.request_id];
      lp.insert(lp.end(), e.logprobs.begin(), e.logprobs.end());
      if (e.finished) out.last[e.request_id] = e;
    };
    testing::run_to_completion(sched, requests, on_event);
    out.stats = sched.stats();
    // Every page a request held is back, or in the prefix cache, which flushes to nothing.
    EXPECT_EQ(out.stats.kv_pages_used, out.stats.kv_pages_cached);
    EXPECT_TRUE(sched.flush_cache());
    EXPECT_EQ(sched.stats().kv_pages_used, 0);
  }
  EXPECT_TRUE(model.errors_copy().empty()) << model.errors_copy().front();
  out.steps = model.steps.load();
  out.max_rows = model.max_batch_rows.load();
  return out;
}

// `sampled`: requests whose draws differ (the acceptance rule uses the request's RNG too).
void expect_same_output(const Outcome& plain, const Outcome& spec,
                        const std::set<uint64_t>& sampled = {}) {
  ASSERT_EQ(plain.tokens.size(), spec.tokens.size());
  for (const auto& [id, tokens] : plain.tokens) {
    if (sampled.count(id) != 0) continue;
    EXPECT_EQ(spec.tokens.at(id), tokens) << "request " << id;
    EXPECT_EQ(spec.text.at(id), plain.text.at(id)) << "request " << id;
    const RequestEvent& a = plain.last.at(id);
    const RequestEvent& b = spec.last.at(id);
    EXPECT_EQ(b.finish_reason, a.finish_reason) << "request " << id;
    EXPECT_EQ(b.matched_stop, a.matched_stop) << "request " << id;
    EXPECT_EQ(b.completion_tokens, a.completion_tokens) << "request " << id;
  }
}

std::vector<GenerateRequest> greedy_requests(int n, int max_new) {
  std::vector<GenerateRequest> r;
  for (int i = 0; i < n; ++i) r.push_back(make_request(3 + 5 * i, 40 + i, max_new, 0.0));
  return r;
}

TEST(SpeculativeDecoding, GreedyOutputEqualsPlainDecodingAtBatchOneAndThree) {
  for (int n : {1, 3}) {
    SCOPED_TRACE("batch " + std::to_string(n));
    const auto requests = greedy_requests(n, 80);
    const Outcome plain = run(requests, {});
    const Outcome spec = run(requests, ngram());
    expect_same_output(plain, spec);
    // The path under test ran: proposals were verified, some accepted, in fewer steps.
    EXPECT_GT(spec.stats.spec_verify_steps, 0);
    EXPECT_GT(spec.stats.spec_accepted_tokens, 0);
    EXPECT_LT(spec.steps, plain.steps);
    EXPECT_GT(spec.max_rows, n);
    EXPECT_EQ(plain.stats.spec_verify_steps, 0);
    EXPECT_EQ(spec.stats.generated_tokens_total, plain.stats.generated_tokens_total);
    int64_t histogram = 0, accepted = 0;
    for (size_t a = 0; a < spec.stats.spec_accept_histogram.size(); ++a) {
      histogram += spec.stats.spec_accept_histogram[a];
      accepted += static_cast<int64_t>(a) * spec.stats.spec_accept_histogram[a];
    }
    EXPECT_EQ(histogram, spec.stats.spec_verify_steps);
    EXPECT_EQ(accepted, spec.stats.spec_accepted_tokens);
    // Per request: SGLang's counts, consistent with the output.
    int proposed = 0;
    for (const auto& [id, ev] : spec.last) {
      EXPECT_GT(ev.spec_verify_ct, 0);
      EXPECT_LE(ev.spec_accepted, ev.spec_proposed);
      EXPECT_LT(ev.spec_verify_ct, ev.completion_tokens);  // more than one token per step
      proposed += ev.spec_proposed;
      EXPECT_EQ(plain.last.at(id).spec_verify_ct, -1);  // not reported without speculation
    }
    EXPECT_EQ(proposed, spec.stats.spec_proposed_tokens);
  }
}

TEST(SpeculativeDecoding, EveryDraftLengthAndMatchWindowKeepsTheOutput) {
  const auto requests = greedy_requests(2, 60);
  const Outcome plain = run(requests, {});
  for (int k : {1, 2, 7, 16}) {
    for (auto [lo, hi] : {std::pair{1, 1}, std::pair{1, 12}, std::pair{3, 5}}) {
      SCOPED_TRACE("k " + std::to_string(k) + " window " + std::to_string(lo) + ".." +
                   std::to_string(hi));
      SpeculativeConfig s = ngram(k);
      s.ngram_match = {lo, hi};
      expect_same_output(plain, run(requests, s));
    }
  }
}

TEST(SpeculativeDecoding, NonMarkovOutputStillMatchesTheReference) {
  // The ordinary fake model rarely repeats itself: what is proposed is mostly rejected, and
  // the output is still exactly the token-by-token reference.
  const auto requests = greedy_requests(3, 40);
  const Outcome spec = run(requests, ngram(), /*markov=*/false);
  FakeTokenizer tok(kVocab);
  for (uint64_t id = 1; id <= requests.size(); ++id) {
    const GenerateRequest& r = requests[id - 1];
    const auto ref = testing::reference_generate(r, *r.sampling.seed, tok, kVocab);
    EXPECT_EQ(spec.tokens.at(id), ref.tokens) << "request " << id;
  }
}

TEST(SpeculativeDecoding, SampledLogprobAndStopRequestsBesideGreedyOnes) {
  std::vector<GenerateRequest> requests = greedy_requests(2, 70);
  requests.push_back(make_request(6, 7, 50, 0.8));  // sampled: the acceptance rule
  GenerateRequest with_logprobs = make_request(4, 8, 50, 0.0);
  with_logprobs.logprobs = 2;  // greedy, but logprobs need every row's distribution
  requests.push_back(with_logprobs);
  // A stop string longer than the greedy cycle's period, taken from the end of a first run's
  // text: it first completes inside the cycle's repetition, where proposals are accepted.
  const Outcome probe = run({make_request(9, 9, 70, 0.0)}, {});
  const std::string text = probe.text.at(1);
  ASSERT_GT(text.size(), 160u);
  GenerateRequest stopped = make_request(9, 9, 70, 0.0);
  stopped.stop.stop_strings = {text.substr(text.size() - 80)};
  requests.push_back(stopped);
  GenerateRequest short_one = make_request(5, 10, 3, 0.0);  // max_new_tokens below k
  requests.push_back(short_one);
  // Sampled at a temperature low enough for the output to cycle (fake logits are ~0.016
  // apart), so proposals are made and go through the acceptance rule.
  GenerateRequest cold = make_request(6, 11, 50, 0.001);
  cold.sampling.top_k = 2;
  requests.push_back(cold);

  const Outcome plain = run(requests, {});
  const Outcome spec = run(requests, ngram(8, /*max_batch=*/8));
  expect_same_output(plain, spec, /*sampled=*/{3, 7});
  // The sampled requests ran to their length, the cycling one with proposals accepted (their
  // distribution: the acceptance rule's own test); the greedy one with logprobs has plain
  // decoding's logprobs.
  EXPECT_EQ(spec.tokens.at(3).size(), 50u);
  EXPECT_EQ(spec.tokens.at(7).size(), 50u);
  EXPECT_GT(spec.last.at(7).spec_accepted, 0);
  EXPECT_GT(spec.last.at(4).spec_accepted, 0);
  ASSERT_EQ(spec.logprobs.at(4).size(), plain.logprobs.at(4).size());
  for (size_t i = 0; i < plain.logprobs.at(4).size(); ++i) {
    const TokenLogprob& a = plain.logprobs.at(4)[i];
    const TokenLogprob& b = spec.logprobs.at(4)[i];
    EXPECT_EQ(b.token, a.token) << i;
    EXPECT_EQ(b.logprob, a.logprob) << i;
    EXPECT_EQ(b.top, a.top) << i;
  }
  EXPECT_EQ(spec.last.at(5).finish_reason, FinishReason::Stop);
  EXPECT_GT(spec.last.at(5).spec_accepted, 0);
  EXPECT_EQ(spec.tokens.at(6).size(), 3u);
  EXPECT_GT(spec.stats.spec_accepted_tokens, 0);
}

TEST(SpeculativeDecoding, PreemptionInATinyPoolKeepsTheOutput) {
  // 12 pages of 4 tokens for 4 requests of ~60 tokens: requests are preempted and re-prefilled,
  // and proposals find few free pages for their rows.
  const auto requests = greedy_requests(4, 40);
  const KvPoolConfig tiny{2, 1, 8, 4, 24};
  const Outcome plain = run(requests, {}, true, tiny);
  const Outcome spec = run(requests, ngram(8), true, tiny);
  expect_same_output(plain, spec);
  EXPECT_GT(spec.stats.preemptions, 0);
  EXPECT_GT(spec.stats.spec_accepted_tokens, 0);
}

TEST(SpeculativeDecoding, RejectedRowsLeaveNoTraceInThePrefixCache) {
  // The same request twice in a row: the second reuses the first's cached pages (prompt and
  // output). Had a cached page held a rejected proposal's K/V, the second output, which
  // depends on every record of its history, would differ from a fresh run's.
  GenerateRequest r = make_request(8, 3, 70, 0.0);
  const Outcome plain = run({r}, {});
  KvPool pool({2, 1, 8, 4, 256});
  FakeModel model(pool, kVocab);
  model.markov = true;
  FakeTokenizer tok(kVocab);
  EngineConfig ec;
  ec.speculative = ngram(8);
  Scheduler sched(model, pool, tok, ec, flat_costs());
  for (uint64_t id = 1; id <= 2; ++id) {
    GenerateRequest again = r;
    // The second request reads its history through the K/V records (not markov): a record
    // left by a rejected row would change its output.
    model.markov = id == 1;
    if (id == 2) {  // prompt + the first output: everything but the last page is cached
      again.prompt_ids.insert(again.prompt_ids.end(), plain.tokens.at(1).begin(),
                              plain.tokens.at(1).end());
      again.stop.max_new_tokens = 20;
    }
    std::vector<int32_t> got;
    RequestEvent last;
    sched.add(
        id, again,
        [&](const RequestEvent& e) {
          got.insert(got.end(), e.new_tokens.begin(), e.new_tokens.end());
          if (e.finished) last = e;
        },
        1);
    while (!sched.idle()) sched.step();
    if (id == 1) {
      EXPECT_EQ(got, plain.tokens.at(1));
      EXPECT_GT(last.spec_accepted, 0);
    } else {
      EXPECT_GT(last.cached_tokens, 60);
      const Outcome fresh = run({again}, {}, /*markov=*/false);
      EXPECT_EQ(got, fresh.tokens.at(1));
    }
  }
  EXPECT_TRUE(model.errors_copy().empty());
}

TEST(SpeculativeDecoding, OffAboveTheBatchLimit) {
  const auto requests = greedy_requests(3, 40);
  const Outcome limited = run(requests, ngram(4, /*max_batch=*/2));
  // Three requests decode together from their first decode step to the end (same lengths,
  // ignore_eos): no step is small enough to speculate.
  EXPECT_EQ(limited.stats.spec_verify_steps, 0);
  expect_same_output(run(requests, {}), limited);
  EXPECT_GT(run(requests, ngram(4, /*max_batch=*/3)).stats.spec_verify_steps, 0);
}

TEST(SpeculativeDecoding, InvalidConfigurationsAreRefused) {
  KvPool pool({2, 1, 8, 4, 64});
  FakeModel model(pool, kVocab);
  FakeTokenizer tok(kVocab);
  using Mutation = void (*)(SpeculativeConfig&);
  const std::vector<Mutation> mutations = {
      [](SpeculativeConfig& s) { s.num_draft_tokens = 0; },
      [](SpeculativeConfig& s) { s.num_draft_tokens = SpeculativeConfig::kMaxDraftTokens + 1; },
      [](SpeculativeConfig& s) {
        s.ngram_match = {3, 2};
      },
      [](SpeculativeConfig& s) {
        s.ngram_match = {0, 2};
      },
      [](SpeculativeConfig& s) { s.max_batch = 0; }};
  for (Mutation mutate : mutations) {
    EngineConfig ec;
    ec.speculative = ngram();
    mutate(ec.speculative);
    EXPECT_THROW(Scheduler(model, pool, tok, ec, flat_costs()), Error);
  }
}

}  // namespace
}  // namespace kiln::engine
