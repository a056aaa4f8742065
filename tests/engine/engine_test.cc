// The Engine end to end over FakeModel: every output is compared with reference_generate
// (the same request run alone, token by token, without the scheduler).
#include "kiln/engine/engine.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "engine/engine_harness.h"
#include "kiln/base/error.h"
#include "kiln/engine/kv_pool.h"

namespace kiln::engine {
namespace {

using namespace std::chrono_literals;
using testing::Collector;
using testing::FakeModel;
using testing::FakeTokenizer;
using testing::Gate;
using testing::Generation;
using testing::Harness;
using testing::kVocab;
using testing::make_request;
using testing::reference_generate;
using testing::Result;

TEST(Engine, SingleRequestsMatchTheReference) {
  Harness h;
  std::vector<uint64_t> ids;
  ids.push_back(h.submit(make_request(5, 1, 20, 0.0)));
  ASSERT_TRUE(h.collector.wait(1));
  ids.push_back(h.submit(make_request(9, 2, 20, 0.9)));
  ASSERT_TRUE(h.collector.wait(2));
  ids.push_back(h.submit(make_request(1, 3, 15, 1.3, /*ignore_eos=*/false)));
  ASSERT_TRUE(h.collector.wait(3));
  for (auto id : ids) h.expect_matches_reference(id);
  EXPECT_GT(h.model.greedy_steps.load(), 0);  // the greedy request used the fast path
  h.expect_no_leak();
}

TEST(Engine, ContinuousBatchingJoinsAndFinishesMidFlightWithIdenticalOutputs) {
  Harness h;
  std::vector<uint64_t> ids;
  for (int i = 0; i < 6; ++i)
    ids.push_back(h.submit(make_request(3 + i * 5, 10 + i, 10 + 7 * i, i % 2 ? 0.8 : 0.0, i % 3)));
  // Join while the first wave runs.
  for (int i = 0; i < 300 && h.collector.finished() == 0; ++i) std::this_thread::sleep_for(1ms);
  for (int i = 6; i < 12; ++i)
    ids.push_back(h.submit(make_request(2 + i, 10 + i, 5 + 3 * i, i % 2 ? 1.0 : 0.0, i % 3)));
  ASSERT_TRUE(h.collector.wait(12));
  for (auto id : ids) h.expect_matches_reference(id);
  EXPECT_GT(h.model.max_batch_seqs.load(), 1);
  EXPECT_GT(h.model.decode_steps.load(), 0);
  const EngineStats s = h.wait_idle();
  EXPECT_EQ(s.requests_finished, 12);
  h.expect_no_leak();
}

TEST(Engine, ChunkedPrefillGivesTheSameOutputs) {
  EngineConfig ec;
  ec.chunked_prefill_size = 16;
  ec.max_prefill_tokens = 40;
  Harness h({2, 1, 8, 4, 512}, ec);
  std::vector<uint64_t> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(h.submit(make_request(150 + 13 * i, 40 + i, 12, 0.7)));
  ASSERT_TRUE(h.collector.wait(4));
  for (auto id : ids) h.expect_matches_reference(id);
  // max_prefill_tokens bounds a step's prompt rows; a step that mixes in decoding requests adds
  // one row for each (at most 3 here: the fourth is still prefilling). Whether such a step
  // happens depends on how fast the requests arrive: it failed once in a full suite run when the
  // bound was 40 rows in all.
  EXPECT_LE(h.model.max_batch_rows.load(), 40 + 3);
  h.expect_no_leak();
}

// One request decodes 120 tokens; once the test's before_forward hook has seen a decode step
// (decoding_seen), three 100-token prompts arrive. Every output must match the reference.
void prompts_arrive_while_one_decodes(Harness& h, const std::atomic<bool>& decoding_seen) {
  const uint64_t first = h.submit(make_request(8, 1, 120, 0.0));
  for (int i = 0; i < 5000 && !decoding_seen; ++i) std::this_thread::sleep_for(1ms);
  ASSERT_TRUE(decoding_seen);
  std::vector<uint64_t> ids{first};
  for (int i = 0; i < 3; ++i) ids.push_back(h.submit(make_request(100, 2 + i, 4, 0.0)));
  ASSERT_TRUE(h.collector.wait(4));
  for (auto id : ids) h.expect_matches_reference(id);
}

TEST(Engine, PrefillStepsAreCappedWhileRequestsDecode) {
  EngineConfig ec;
  ec.max_prefill_tokens_while_decoding = 16;
  ec.mixed_steps = false;  // alternating steps: every step is pure prefill or pure decode
  Harness h({2, 1, 8, 4, 512}, ec);
  std::atomic<bool> decoding_seen{false};
  std::atomic<int64_t> capped_prefills{0}, violations{0};
  h.model.before_forward = [&](const StepBatch& b) {
    std::this_thread::sleep_for(1ms);  // the first request keeps decoding while prompts arrive
    if (b.is_decode()) {
      decoding_seen = true;
    } else if (decoding_seen) {
      ++capped_prefills;
      if (b.num_tokens() > 16) ++violations;
    }
  };
  ASSERT_NO_FATAL_FAILURE(prompts_arrive_while_one_decodes(h, decoding_seen));
  EXPECT_GT(capped_prefills.load(), 6);  // 300 prompt tokens in steps of at most 16
  EXPECT_EQ(violations.load(), 0);
  h.expect_no_leak();
}

// With mixed steps (the default), a decoding request's token rides along with every prefill
// chunk that runs while it decodes: no step is prefill-only then, and the chunks keep the cap.
TEST(Engine, MixedStepsCarryDecodeRowsWithCappedPrefillChunks) {
  EngineConfig ec;
  ec.max_prefill_tokens_while_decoding = 16;
  ec.chunked_prefill_size = 16;
  Harness h({2, 1, 8, 4, 512}, ec);
  std::atomic<bool> decoding_seen{false};
  std::atomic<int64_t> mixed{0}, prefill_only{0}, over_cap{0};
  h.model.before_forward = [&](const StepBatch& b) {
    std::this_thread::sleep_for(1ms);  // the first request keeps decoding while prompts arrive
    if (b.is_decode()) {
      decoding_seen = true;
      return;
    }
    if (!decoding_seen) return;
    // The long prompts (100 tokens) come in chunks of 16 and a last one of 4, so a sequence
    // with a single row is the decoding request.
    std::vector<int64_t> rows(b.seqs.size(), 0);
    for (int32_t s : b.token_seq) ++rows[static_cast<size_t>(s)];
    int64_t decode_rows = 0, prompt_rows = 0;
    for (int64_t r : rows) (r == 1 ? decode_rows : prompt_rows) += r;
    if (decode_rows > 0) ++mixed;
    if (decode_rows == 0) ++prefill_only;
    if (prompt_rows > 16) ++over_cap;
  };
  ASSERT_NO_FATAL_FAILURE(prompts_arrive_while_one_decodes(h, decoding_seen));
  EXPECT_GT(mixed.load(), 6);  // 300 prompt tokens, at most 16 per step, beside the decode row
  EXPECT_EQ(over_cap.load(), 0);
  const EngineStats s = h.wait_idle();
  EXPECT_EQ(s.mixed_steps, mixed.load());
  // The first request decodes for the whole time (120 tokens), so no step leaves it out.
  EXPECT_EQ(prefill_only.load(), 0);
  // Step time by kind: the first prompt's steps (before anything decodes) are prefill steps,
  // mixed steps are counted with their rows, and pure decode steps as replayed (the fake model
  // reports them as graph steps).
  const StepTime& mixed_time = s.step_time[static_cast<size_t>(StepKind::Mixed)];
  const StepTime& decode_time = s.step_time[static_cast<size_t>(StepKind::DecodeGraph)];
  EXPECT_EQ(mixed_time.steps, s.mixed_steps);
  EXPECT_GE(mixed_time.rows, 2 * mixed_time.steps);  // a prompt row and a decode row at least
  EXPECT_GE(mixed_time.seconds, 0.001 * static_cast<double>(mixed_time.steps));  // 1 ms sleeps
  EXPECT_EQ(decode_time.steps, s.graph_steps);
  EXPECT_GT(decode_time.steps, 0);
  EXPECT_GE(decode_time.rows, decode_time.steps);  // a row per decoding request
  EXPECT_GE(s.step_time[static_cast<size_t>(StepKind::Prefill)].steps, 1);
  EXPECT_EQ(s.step_time[static_cast<size_t>(StepKind::DecodeEager)].steps, 0);
  int64_t all_steps = 0;
  for (const StepTime& t : s.step_time) all_steps += t.steps;
  EXPECT_EQ(all_steps, s.eager_steps + s.graph_steps);
  h.expect_no_leak();
}

TEST(Engine, PrefixCacheHitReportsCachedTokensAndKeepsOutputs) {
  Harness h;
  GenerateRequest a = make_request(30, 50, 10, 0.0);
  const uint64_t ia = h.submit(a);
  ASSERT_TRUE(h.collector.wait(1));
  EXPECT_EQ(h.collector.get(ia).cached_tokens, 0);
  GenerateRequest b = a;  // same prompt, sampled differently
  b.sampling.temperature = 0.9;
  b.sampling.seed = 51;
  const uint64_t ib = h.submit(b);
  GenerateRequest c = a;  // shares a prefix only
  c.prompt_ids.resize(18);
  c.prompt_ids.push_back(7);
  c.sampling.seed = 52;
  ASSERT_TRUE(h.collector.wait(2));
  const uint64_t ic = h.submit(c);
  ASSERT_TRUE(h.collector.wait(3));
  h.expect_matches_reference(ia);
  h.expect_matches_reference(ib);
  h.expect_matches_reference(ic);
  EXPECT_EQ(h.collector.get(ib).cached_tokens, 28);  // 29 matchable tokens, in 4-token pages
  EXPECT_EQ(h.collector.get(ic).cached_tokens, 16);
  const EngineStats s = h.wait_idle();
  EXPECT_EQ(s.prefix_cache_hit_tokens, 44);
  EXPECT_GT(s.kv_pages_cached, 0);
  h.expect_no_leak();
}

TEST(Engine, ConcurrentRequestsShareAPromptPrefix) {
  Harness h;
  GenerateRequest base = make_request(64, 60, 8, 0.0);
  std::vector<uint64_t> ids;
  for (int i = 0; i < 6; ++i) {
    GenerateRequest r = base;
    r.prompt_ids.push_back(100 + i);
    r.sampling.seed = 60 + i;
    r.sampling.temperature = 0.5;
    ids.push_back(h.submit(r));
  }
  ASSERT_TRUE(h.collector.wait(6));
  for (auto id : ids) h.expect_matches_reference(id);
  h.expect_no_leak();
}

TEST(Engine, EvictionUnderPressureKeepsServing) {
  Harness h({2, 1, 8, 4, 48});  // 192 tokens of KV
  std::vector<uint64_t> ids;
  for (int i = 0; i < 20; ++i) {
    ids.push_back(h.submit(make_request(40, 70 + i, 20, 0.6)));
    ASSERT_TRUE(h.collector.wait(i + 1));
  }
  for (auto id : ids) h.expect_matches_reference(id);
  const EngineStats s = h.wait_idle();
  EXPECT_GT(s.kv_pages_cached, 0);
  EXPECT_LE(s.kv_pages_used, s.kv_pages_total);
  h.expect_no_leak();
}

TEST(Engine, PreemptionUnderATinyPoolFinishesEverythingIdentically) {
  for (bool cache : {true, false}) {
    EngineConfig ec;
    ec.enable_prefix_cache = cache;
    Harness h({2, 1, 8, 4, 24}, ec);  // 96 tokens; each request needs up to 40
    // All eight must be waiting when the scheduler next forms a step, so that several are
    // admitted together and outgrow the pool (admission keeps a page of headroom per decoding
    // request, so requests admitted one at a time, as a fast host submitting to an idle engine
    // can make them, may each finish before the pool runs out): a one-token request's step is
    // held at the gate while they are queued (as in the JSON preemption test).
    Gate gate;
    h.model.before_forward = [&](const StepBatch&) { gate.pass(); };
    const uint64_t opener = h.submit(make_request(1, 79, 1, 0.0));
    gate.wait_entered(1);
    std::vector<uint64_t> ids;
    for (int i = 0; i < 8; ++i)
      ids.push_back(h.submit(make_request(10, 80 + i, 30, i % 2 ? 0.8 : 0.0)));
    gate.release();
    ASSERT_TRUE(h.collector.wait(9));
    h.expect_matches_reference(opener);
    for (auto id : ids) h.expect_matches_reference(id);
    EXPECT_GT(h.engine->stats().preemptions, 0) << "cache " << cache;
    h.expect_no_leak();
  }
}

TEST(Engine, StopStringsAndLogprobsThroughTheEngine) {
  Harness h;
  // Find a stop string the greedy continuation will produce: run once, take two tokens' text.
  GenerateRequest probe = make_request(6, 90, 12, 0.0);
  const Generation g = reference_generate(probe, 90, h.tok, kVocab);
  ASSERT_GE(g.tokens.size(), 8u);
  const std::string stop = h.tok.piece(g.tokens[4]) + h.tok.piece(g.tokens[5]);
  GenerateRequest r = probe;
  r.stop.stop_strings = {stop};
  r.logprobs = 2;
  const uint64_t id = h.submit(r);
  ASSERT_TRUE(h.collector.wait(1));
  h.expect_matches_reference(id);
  const Result got = h.collector.get(id);
  EXPECT_EQ(got.reason, FinishReason::Stop);
  EXPECT_EQ(got.matched_stop, stop);
  EXPECT_EQ(got.text.find(stop), std::string::npos);
  ASSERT_EQ(got.logprobs.size(), got.tokens.size());
  for (size_t i = 0; i < got.tokens.size(); ++i) {
    EXPECT_EQ(got.logprobs[i].token, got.tokens[i]);
    ASSERT_EQ(got.logprobs[i].top.size(), 2u);
    EXPECT_EQ(got.logprobs[i].top[0].first, got.tokens[i]);  // greedy: the top alternative
  }
  EXPECT_EQ(h.model.greedy_steps.load(), 0);  // logprobs need real logits
}

TEST(Engine, MinAndMaxNewTokens) {
  Harness h;
  GenerateRequest r = make_request(4, 95, 6, 0.0, /*ignore_eos=*/false);
  r.stop.min_new_tokens = 6;
  r.stop.stop_token_ids = {3, 4, 5, 6, 7, 8, 9, 10};
  const uint64_t a = h.submit(r);
  GenerateRequest zero = make_request(4, 96, 0, 0.0);
  const uint64_t b = h.submit(zero);
  ASSERT_TRUE(h.collector.wait(2));
  h.expect_matches_reference(a);
  EXPECT_EQ(h.collector.get(a).tokens.size(), 6u);
  EXPECT_EQ(h.collector.get(a).reason, FinishReason::Length);
  EXPECT_EQ(h.collector.get(b).reason, FinishReason::Length);
  EXPECT_TRUE(h.collector.get(b).tokens.empty());
}

TEST(Engine, InvalidRequestsAreRejectedAtSubmit) {
  Harness h({2, 1, 8, 4, 16});
  auto cb = h.collector.callback();
  EXPECT_THROW(h.engine->submit(GenerateRequest{}, cb), Error);
  GenerateRequest r = make_request(4, 1, 4, 0.0);
  r.prompt_ids[1] = static_cast<int32_t>(kVocab);
  EXPECT_THROW(h.engine->submit(r, cb), Error);
  r = make_request(4, 1, 4, 0.0);
  r.sampling.top_p = 0;
  EXPECT_THROW(h.engine->submit(r, cb), Error);
  r = make_request(40, 1, 40, 0.0);  // 80 tokens > 64 tokens of KV
  EXPECT_THROW(h.engine->submit(r, cb), Error);
  r = make_request(4, 1, 5000, 0.0);  // over the context
  EXPECT_THROW(h.engine->submit(r, cb), Error);
  EXPECT_EQ(h.collector.finished(), 0);
}

TEST(Engine, CancelQueuedAndRunningRequests) {
  EngineConfig ec;
  ec.max_running_requests = 2;
  Harness h({2, 1, 8, 4, 256}, ec);
  Gate gate;
  h.model.before_forward = [&](const StepBatch&) { gate.pass(); };
  const uint64_t a = h.submit(make_request(8, 1, 200, 0.0));
  // b cancels itself from its own callback (on the scheduler thread) after 5 tokens.
  std::atomic<uint64_t> b_id{0};
  auto inner = h.collector.callback();
  int b_tokens = 0;
  const GenerateRequest rb = make_request(8, 2, 200, 0.0);
  const uint64_t b = h.engine->submit(rb, [&](const RequestEvent& e) {
    inner(e);
    b_tokens += static_cast<int>(e.new_tokens.size());
    if (b_tokens == 5) h.engine->cancel(b_id.load());
  });
  b_id = b;
  gate.wait_entered(1);
  const uint64_t c = h.submit(make_request(8, 3, 200, 0.0));  // queued
  const uint64_t d = h.submit(make_request(8, 4, 10, 0.0));
  h.engine->cancel(a);
  h.engine->cancel(c);
  h.engine->cancel(12345);  // unknown: ignored
  gate.release();
  ASSERT_TRUE(h.collector.wait(4));
  for (auto id : {a, b, c}) {
    EXPECT_EQ(h.collector.get(id).reason, FinishReason::Abort) << id;
    EXPECT_EQ(h.collector.get(id).finished_events, 1);
    EXPECT_TRUE(h.collector.get(id).error.empty());
  }
  EXPECT_TRUE(h.collector.get(c).tokens.empty());
  // Cancellation is applied at the next step boundary: b saw its 5th token, maybe one more.
  EXPECT_GE(h.collector.get(b).tokens.size(), 5u);
  EXPECT_LE(h.collector.get(b).tokens.size(), 6u);
  h.expect_matches_reference(d);
  h.expect_no_leak();
}

TEST(Engine, ShutdownAbortsEverythingInFlightExactlyOnce) {
  Harness h({2, 1, 8, 4, 256});
  std::vector<uint64_t> ids;
  for (int i = 0; i < 10; ++i) ids.push_back(h.submit(make_request(8, i, 400, 0.5)));
  for (int i = 0; i < 1000 && h.model.decode_steps.load() < 3; ++i)
    std::this_thread::sleep_for(1ms);
  h.engine->shutdown();
  EXPECT_EQ(h.collector.finished(), 10);
  for (auto id : ids) {
    EXPECT_EQ(h.collector.get(id).finished_events, 1);
    EXPECT_EQ(h.collector.get(id).reason, FinishReason::Abort);
  }
  EXPECT_THROW(h.submit(make_request(8, 1, 4, 0.0)), Error);
  h.engine->shutdown();  // idempotent
  EXPECT_TRUE(h.engine->flush_cache());
  EXPECT_EQ(h.engine->stats().kv_pages_used, 0);
  h.engine.reset();
  EXPECT_EQ(h.pool.free_pages(), h.pool.n_pages());
}

TEST(Engine, QueueFullWhenTheQueueIsAtItsBound) {
  EngineConfig ec;
  ec.max_running_requests = 1;
  ec.max_queued_requests = 3;
  Harness h({2, 1, 8, 4, 256}, ec);
  Gate gate;
  h.model.before_forward = [&](const StepBatch&) { gate.pass(); };
  h.submit(make_request(4, 1, 3, 0.0));
  gate.wait_entered(1);  // the first request is running, the scheduler is blocked in forward
  for (int i = 0; i < 3; ++i) h.submit(make_request(4, 2 + i, 3, 0.0));
  EXPECT_THROW(h.submit(make_request(4, 9, 3, 0.0)), QueueFull);
  EXPECT_EQ(h.engine->stats().queued, 3);
  gate.release();
  ASSERT_TRUE(h.collector.wait(4));
  h.submit(make_request(4, 10, 3, 0.0));  // room again
  ASSERT_TRUE(h.collector.wait(5));
  for (auto& [id, r] : h.requests) h.expect_matches_reference(id);
}

TEST(Engine, ExecutorErrorsAbortOnlyTheAffectedRequests) {
  Harness h;
  h.model.poison_token = 7;
  GenerateRequest bad = make_request(6, 1, 10, 0.0);
  bad.prompt_ids[2] = 7;
  const uint64_t ib = h.submit(bad);
  ASSERT_TRUE(h.collector.wait(1));
  EXPECT_EQ(h.collector.get(ib).reason, FinishReason::Abort);
  EXPECT_NE(h.collector.get(ib).error.find("poisoned"), std::string::npos);
  h.model.poison_token = -1;
  const uint64_t ok = h.submit(make_request(6, 2, 10, 0.0));
  ASSERT_TRUE(h.collector.wait(2));
  h.expect_matches_reference(ok);
  h.expect_no_leak();
}

TEST(Engine, SixtyFourConcurrentSubmittersFromSeveralThreads) {
  EngineConfig ec;
  ec.max_running_requests = 16;
  Harness h({2, 1, 8, 4, 400}, ec);
  std::mutex ids_mu;
  std::vector<uint64_t> ids;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 8; ++i) {
        const int k = t * 8 + i;
        GenerateRequest r =
            make_request(3 + k % 17, 1000 + k, 4 + k % 23, k % 3 ? 0.7 : 0.0, k % 2);
        const uint64_t id = h.engine->submit(r, h.collector.callback());
        std::lock_guard lk(ids_mu);
        h.requests[id] = r;
        ids.push_back(id);
      }
    });
  }
  for (auto& th : threads) th.join();
  ASSERT_TRUE(h.collector.wait(64));
  EXPECT_EQ(ids.size(), 64u);
  for (auto id : ids) h.expect_matches_reference(id);
  h.expect_no_leak();
}

TEST(Engine, SleepsWhenIdle) {
  Harness h;
  h.submit(make_request(4, 1, 3, 0.0));
  ASSERT_TRUE(h.collector.wait(1));
  const int64_t steps = h.model.steps.load();
  std::this_thread::sleep_for(50ms);
  EXPECT_EQ(h.model.steps.load(), steps);
}

}  // namespace
}  // namespace kiln::engine
