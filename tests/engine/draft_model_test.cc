// Speculative decoding with a draft model (DraftModelProposer), through the scheduler over two
// FakeModels (each checks its own KV bookkeeping, so a draft row fed at the wrong position or
// over a page it does not own shows up): greedy output equals plain decoding whether the draft
// agrees with the target or not, at batch 1 and 3, with a prompt longer than one catch-up
// chunk, a draft pool too small for every request, preemption, and a draft model that fails;
// the draft pool is empty when the requests are done; mismatched vocabularies are refused.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "engine/engine_harness.h"
#include "kiln/engine/draft_model_proposer.h"
#include "kiln/engine/scheduler.h"

namespace kiln::engine {
namespace {

using testing::FakeModel;
using testing::FakeTokenizer;
using testing::kVocab;
using testing::make_request;

struct DraftSetup {
  bool agrees = true;  // the draft computes the target's logits (markov, like the target)
  KvPoolConfig pool{2, 1, 8, 4, 512};
  int32_t poison = -1;  // the draft model throws on this token
  int k = 4;
};

struct Outcome {
  std::map<uint64_t, std::vector<int32_t>> tokens;
  EngineStats stats;
  int64_t draft_steps = 0;
  int64_t target_steps = 0;
};

// Runs the requests (ids 1..n, all queued up front) with the target model markov (greedy
// output cycles); `draft` null: plain decoding.
Outcome run(const std::vector<GenerateRequest>& requests, const DraftSetup* draft,
            KvPoolConfig target_pool = {2, 1, 8, 4, 256}) {
  KvPool pool(target_pool);
  FakeModel model(pool, kVocab);
  model.markov = true;
  FakeTokenizer tok(kVocab);
  std::optional<KvPool> draft_pool;
  std::optional<FakeModel> draft_model;
  EngineConfig ec;
  ec.random_seed = 1;
  SpeculativeResources resources;
  if (draft != nullptr) {
    draft_pool.emplace(draft->pool);
    draft_model.emplace(*draft_pool, kVocab);
    draft_model->markov = draft->agrees;
    draft_model->poison_token = draft->poison;
    ec.speculative.draft_model = true;
    resources.draft_executor = &*draft_model;
    resources.draft_pool = &*draft_pool;
    ec.speculative.num_draft_tokens = draft->k;
    resources.step_cost = [](int64_t) { return 1.0; };  // the policy never caps (see there)
  }
  Outcome out;
  {
    Scheduler sched(model, pool, tok, ec, resources);
    auto on_event = [&out](const RequestEvent& e) {
      EXPECT_TRUE(e.error.empty()) << e.error;
      auto& t = out.tokens[e.request_id];
      t.insert(t.end(), e.new_tokens.begin(), e.new_tokens.end());
    };
    testing::run_to_completion(sched, requests, on_event);
    out.stats = sched.stats();
    // Finished requests hold no draft pages.
    if (draft_pool) {
      EXPECT_EQ(draft_pool->used_pages(), 0);
    }
  }
  EXPECT_TRUE(model.errors_copy().empty()) << model.errors_copy().front();
  if (draft_model) {
    // Only the poisoned token may fail a draft step; every other step was well formed.
    for (const std::string& e : draft_model->errors_copy()) ADD_FAILURE() << e;
    out.draft_steps = draft_model->steps.load();
  }
  out.target_steps = model.steps.load();
  return out;
}

std::vector<GenerateRequest> greedy_requests(int n, int max_new, int prompt_len = 3) {
  std::vector<GenerateRequest> r;
  for (int i = 0; i < n; ++i) r.push_back(make_request(prompt_len + 5 * i, 40 + i, max_new, 0.0));
  return r;
}

TEST(DraftModel, GreedyOutputEqualsPlainDecodingWhetherTheDraftAgreesOrNot) {
  for (int n : {1, 3}) {
    const auto requests = greedy_requests(n, 60);
    const Outcome plain = run(requests, nullptr);
    for (bool agrees : {true, false}) {
      SCOPED_TRACE(fmt::format("batch {}, draft {}", n, agrees ? "agrees" : "disagrees"));
      DraftSetup d;
      d.agrees = agrees;
      const Outcome spec = run(requests, &d);
      EXPECT_EQ(spec.tokens, plain.tokens);
      EXPECT_GT(spec.stats.spec_verify_steps, 0);
      EXPECT_GT(spec.draft_steps, 0);
      if (agrees) {
        // Every proposal is the target's own token: whole rounds accepted, fewer target steps.
        EXPECT_EQ(spec.stats.spec_accepted_tokens, spec.stats.spec_proposed_tokens);
        EXPECT_LT(spec.target_steps, plain.target_steps);
      } else {
        EXPECT_LT(spec.stats.spec_accepted_tokens, spec.stats.spec_proposed_tokens);
      }
    }
  }
}

TEST(DraftModel, APromptLongerThanACatchUpChunkIsFedInChunks) {
  const int prompt = static_cast<int>(DraftModelProposer::kCatchUpChunk) * 2 + 37;
  const auto requests = greedy_requests(2, 30, prompt);
  DraftSetup d;
  d.pool = {2, 1, 8, 4, 1024};
  const Outcome spec = run(requests, &d, {2, 1, 8, 4, 1024});
  EXPECT_EQ(spec.tokens, run(requests, nullptr, {2, 1, 8, 4, 1024}).tokens);
  EXPECT_EQ(spec.stats.spec_accepted_tokens, spec.stats.spec_proposed_tokens);
  EXPECT_GT(spec.stats.spec_proposed_tokens, 0);
}

TEST(DraftModel, ADraftPoolTooSmallForEveryRequestOnlyCostsProposals) {
  // 40 draft slots of 4 tokens for three requests of ~70 tokens: some rounds have pages for a
  // few proposals or none, and requests that finish give theirs back.
  const auto requests = greedy_requests(3, 50);
  DraftSetup d;
  d.pool = {2, 1, 8, 4, 40};
  const Outcome spec = run(requests, &d);
  EXPECT_EQ(spec.tokens, run(requests, nullptr).tokens);
  EXPECT_GT(spec.stats.spec_accepted_tokens, 0);
}

TEST(DraftModel, PreemptionInATinyTargetPoolKeepsTheOutput) {
  const auto requests = greedy_requests(4, 40);
  const KvPoolConfig tiny{2, 1, 8, 4, 24};
  DraftSetup d;
  d.k = 8;
  const Outcome spec = run(requests, &d, tiny);
  EXPECT_EQ(spec.tokens, run(requests, nullptr, tiny).tokens);
  EXPECT_GT(spec.stats.preemptions, 0);
  EXPECT_GT(spec.stats.spec_accepted_tokens, 0);
}

TEST(DraftModel, AFailingDraftStepCostsOnlyThatRoundsProposals) {
  auto requests = greedy_requests(2, 60);
  const Outcome plain = run(requests, nullptr);
  // A token the first request generates: every draft round that feeds it throws.
  DraftSetup d;
  d.poison = plain.tokens.at(1).at(10);
  const Outcome spec = run(requests, &d);
  EXPECT_EQ(spec.tokens, plain.tokens);
  EXPECT_GT(spec.stats.spec_accepted_tokens, 0);  // rounds before the poison still paid
}

TEST(DraftModel, CancellingASpeculatingRequestReturnsEveryPage) {
  // Two requests speculate with a draft; the first is cancelled mid-generation (a client
  // disconnect): it ends with finish_reason abort, its target and draft pages go back, and the
  // other request's output is plain decoding's.
  const auto requests = greedy_requests(2, 60);
  const Outcome plain = run(requests, nullptr);
  KvPool pool({2, 1, 8, 4, 256});
  FakeModel model(pool, kVocab);
  model.markov = true;
  KvPool draft_pool({2, 1, 8, 4, 256});
  FakeModel draft(draft_pool, kVocab);
  draft.markov = true;
  FakeTokenizer tok(kVocab);
  EngineConfig ec;
  ec.enable_prefix_cache = false;
  ec.speculative.draft_model = true;
  SpeculativeResources resources;
  resources.draft_executor = &draft;
  resources.draft_pool = &draft_pool;
  resources.step_cost = [](int64_t) { return 1.0; };
  Scheduler sched(model, pool, tok, ec, resources);
  std::map<uint64_t, std::vector<int32_t>> tokens;
  std::map<uint64_t, RequestEvent> last;
  auto on_event = [&](const RequestEvent& e) {
    tokens[e.request_id].insert(tokens[e.request_id].end(), e.new_tokens.begin(),
                                e.new_tokens.end());
    if (e.finished) last[e.request_id] = e;
  };
  sched.add(1, requests[0], on_event, 1);
  sched.add(2, requests[1], on_event, 2);
  while (tokens[1].size() < 20) sched.step();
  EXPECT_GT(draft_pool.used_pages(), 0);
  sched.cancel(1);
  EXPECT_EQ(last.at(1).finish_reason, FinishReason::Abort);
  while (!sched.idle()) sched.step();
  EXPECT_EQ(tokens.at(2), plain.tokens.at(2));
  EXPECT_GT(sched.stats().spec_accepted_tokens, 0);
  EXPECT_EQ(pool.used_pages(), 0);
  EXPECT_EQ(draft_pool.used_pages(), 0);
  EXPECT_TRUE(model.errors_copy().empty());
  EXPECT_TRUE(draft.errors_copy().empty());
}

TEST(DraftModel, AnotherVocabularyIsRefused) {
  KvPool pool({2, 1, 8, 4, 64});
  FakeModel model(pool, kVocab);
  KvPool draft_pool({2, 1, 8, 4, 64});
  FakeModel draft(draft_pool, kVocab + 1);
  FakeTokenizer tok(kVocab);
  EngineConfig ec;
  ec.speculative.draft_model = true;
  SpeculativeResources resources;
  resources.draft_executor = &draft;
  resources.draft_pool = &draft_pool;
  try {
    Scheduler sched(model, pool, tok, ec, resources);
    ADD_FAILURE() << "a draft model with another vocabulary was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("vocabulary"), std::string::npos) << e.what();
  }
  // Both n-gram lookup and a draft model: refused too.
  ec.speculative.ngram = true;
  FakeModel same(draft_pool, kVocab);
  resources.draft_executor = &same;
  EXPECT_THROW(Scheduler(model, pool, tok, ec, resources), Error);
  // A draft model without its executor: refused.
  ec.speculative.ngram = false;
  EXPECT_THROW(Scheduler(model, pool, tok, ec), Error);
}

}  // namespace
}  // namespace kiln::engine
