// JSON-constrained requests through the Engine over FakeModel, whose logits are random: left
// alone it never writes JSON, so each output being exactly an allowed value followed by end of
// sequence shows the constraint at work (greedy and sampled, n > 1 alike, batched together).
// FakeTokenizer has single-letter tokens, enough to spell true, false and null.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "engine/engine_harness.h"
#include "kiln/base/error.h"
#include "kiln/engine/json/json_schema.h"

namespace kiln::engine {
namespace {

using testing::FakeTokenizer;
using testing::Gate;
using testing::Harness;
using testing::make_request;
using testing::Result;

std::shared_ptr<const JsonSchema> boolean_or_null() {
  return JsonSchema::compile(nlohmann::json::parse(R"({"type": ["boolean", "null"]})"));
}

TEST(JsonConstrainedEngine, EveryOutputIsAnAllowedValueThenEndOfSequence) {
  Harness h;
  std::vector<uint64_t> ids;
  const auto schema = boolean_or_null();  // one compiled copy, as the schema cache hands out
  for (int i = 0; i < 12; ++i) {
    GenerateRequest r = make_request(3 + i, 500 + i, 40, i % 3 == 0 ? 0.0 : 1.0,
                                     /*ignore_eos=*/false);
    r.sampling.json_schema = schema;
    ids.push_back(h.submit(r));
  }
  ASSERT_TRUE(h.collector.wait(static_cast<int>(ids.size())));
  std::set<std::string> seen;
  for (uint64_t id : ids) {
    const Result got = h.collector.get(id);
    EXPECT_TRUE(got.error.empty()) << got.error;
    EXPECT_EQ(got.reason, FinishReason::Stop) << got.text;
    EXPECT_TRUE(got.text == "true" || got.text == "false" || got.text == "null") << got.text;
    ASSERT_FALSE(got.tokens.empty());
    EXPECT_TRUE(h.tok.is_end_of_generation(got.tokens.back()));
    seen.insert(got.text);
  }
  EXPECT_GT(seen.size(), 1u);                 // sampling explores the alternatives
  EXPECT_EQ(h.model.greedy_steps.load(), 0);  // constrained greedy requests need the logits
  // The requests pass through the same few states ("", "t", "tr", ..., 14 in all): each mask
  // is walked once, then served from the cache (prefetched while the forward pass ran).
  const EngineStats s = h.wait_idle();
  EXPECT_LE(s.json_mask_misses, 14);
  EXPECT_GT(s.json_mask_hits, 12);
  h.expect_no_leak();
}

TEST(JsonConstrainedEngine, TruncatedByMaxNewTokensFinishesWithLength) {
  Harness h;
  GenerateRequest r = make_request(4, 7, 2, 1.0, /*ignore_eos=*/false);
  r.sampling.json_schema = boolean_or_null();
  const uint64_t id = h.submit(r);
  ASSERT_TRUE(h.collector.wait(1));
  const Result got = h.collector.get(id);
  EXPECT_EQ(got.reason, FinishReason::Length);
  ASSERT_EQ(got.tokens.size(), 2u);
  EXPECT_TRUE(std::string("true").starts_with(got.text) ||
              std::string("false").starts_with(got.text) ||
              std::string("null").starts_with(got.text))
      << got.text;
}

TEST(JsonConstrainedEngine, PreemptedRequestsKeepTheirPlaceInTheValue) {
  // 24 pages of 4 tokens: four 22-token prompts fill them, and the values' third token needs
  // a page no request has, so requests are preempted mid-value and re-prefilled later.
  // All eight must be waiting when the scheduler next forms a step, so that four are admitted
  // together before any decodes (admission keeps a page of headroom per decoding request, so
  // requests admitted one at a time never run out). Submitted one by one to a free engine,
  // the fake model is fast enough that each could even finish before the next arrives. So a
  // one-token request's step is held at the gate while the eight are queued.
  Harness h({2, 1, 8, 4, 24});
  Gate gate;
  h.model.before_forward = [&](const StepBatch&) { gate.pass(); };
  const uint64_t opener = h.submit(make_request(1, 899, 1, 0.0));
  gate.wait_entered(1);
  std::vector<uint64_t> ids;
  for (int i = 0; i < 8; ++i) {
    GenerateRequest r = make_request(22, 900 + i, 8, 1.0, /*ignore_eos=*/false);
    r.sampling.json_schema = boolean_or_null();
    ids.push_back(h.submit(r));
  }
  gate.release();
  ASSERT_TRUE(h.collector.wait(static_cast<int>(ids.size()) + 1));
  EXPECT_EQ(h.collector.get(opener).reason, FinishReason::Length);
  for (uint64_t id : ids) {
    const Result got = h.collector.get(id);
    EXPECT_TRUE(got.error.empty()) << got.error;
    EXPECT_EQ(got.reason, FinishReason::Stop);
    EXPECT_TRUE(got.text == "true" || got.text == "false" || got.text == "null") << got.text;
  }
  EXPECT_GT(h.engine->stats().preemptions, 0);
  h.expect_no_leak();
}

TEST(JsonConstrainedEngine, ARequestThatCouldNeverEndIsRefused) {
  Harness h;
  auto cb = h.collector.callback();
  GenerateRequest r = make_request(4, 1, 8, 0.0, /*ignore_eos=*/true);
  r.sampling.json_schema = boolean_or_null();
  EXPECT_THROW(h.engine->submit(r, cb), Error);
  r.stop.ignore_eos = false;
  r.stop.min_new_tokens = 2;
  EXPECT_THROW(h.engine->submit(r, cb), Error);
}

// json_after: the output is free until the marker, the value after it is constrained, and the
// constraint lifts once the value is complete, to start again at the next marker (as a tool
// call's JSON after "<tool_call>"). 'q' is made frequent with a logit bias.
TEST(JsonConstrainedEngine, ValueAfterAMarkerIsConstrainedThenTheOutputIsFreeAgain) {
  Harness h;
  std::vector<uint64_t> ids;
  for (int i = 0; i < 6; ++i) {
    GenerateRequest r = make_request(3 + i, 700 + i, 150, 1.0, /*ignore_eos=*/true);
    r.sampling.top_k = -1;
    r.sampling.logit_bias = {{FakeTokenizer::letter('q'), 6.0f}};
    r.sampling.json_schema = boolean_or_null();
    // Two markers, as Qwen2.5-Coder's format has ("<tool_call>" and a ```json fence); "x"
    // is rare, so most values follow 'q'.
    r.sampling.json_after = {"q", "x"};
    ids.push_back(h.submit(r));
  }
  ASSERT_TRUE(h.collector.wait(static_cast<int>(ids.size())));
  int values = 0, free_after_value = 0;
  for (uint64_t id : ids) {
    const Result got = h.collector.get(id);
    EXPECT_TRUE(got.error.empty()) << got.error;
    const std::string& t = got.text;
    for (size_t i = t.find('q'); i != std::string::npos; i = t.find('q', i)) {
      size_t j = i + 1;
      while (j < t.size() && t[j] == ' ') ++j;
      const std::string rest = t.substr(j, 5);
      bool ok = false;
      for (const std::string v : {"true", "false", "null"}) {
        if (rest.starts_with(v)) {
          ok = true;
          ++values;
          j += v.size();
          if (j < t.size() && t[j] != 'q') ++free_after_value;  // unconstrained text again
        } else if (j + rest.size() == t.size() && v.starts_with(rest)) {
          ok = true;  // cut off by max_new_tokens inside the value
        }
      }
      EXPECT_TRUE(ok) << "after the marker at " << i << ": " << t;
      i = j;
    }
  }
  EXPECT_GE(values, 6);
  EXPECT_GE(free_after_value, 3);
  h.expect_no_leak();
}

}  // namespace
}  // namespace kiln::engine
