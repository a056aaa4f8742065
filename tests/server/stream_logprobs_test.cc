// Streamed logprobs against non-streamed ones when the engine holds text back (it may be the
// start of a stop string): every token's entry must reach the client exactly once, in order.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "server/server_fixture.h"

namespace kiln::server {
namespace {

using nlohmann::json;
using testing::FakeEngine;
using testing::ServerFixture;

class StreamLogprobs : public ServerFixture {
 protected:
  // Stop strings for `prompt_ids`' output: the first is never completed but makes the engine
  // hold back letters 3 and 4 (they start it); the second ends the output at letter 12, so the
  // letters that start it are held back and never released.
  static json stops_for(const std::vector<int32_t>& prompt_ids) {
    std::string full = FakeEngine::expected_text(prompt_ids, 20);
    return {full.substr(3, 2) + "Z", full.substr(10, 3)};
  }
};

TEST_F(StreamLogprobs, Completions) {
  start();
  json body = {{"prompt", "hi"},
               {"max_tokens", 20},
               {"logprobs", 2},
               {"stop", stops_for(codec_.encode("hi", true))}};
  auto whole = post("/v1/completions", body.dump());
  ASSERT_EQ(whole->status, 200) << whole->body;
  const json want = json::parse(whole->body)["choices"][0]["logprobs"];
  ASSERT_EQ(want["tokens"].size(), 13u) << want;  // letters 0..12, the stop string's included

  body["stream"] = true;
  auto streamed = post("/v1/completions", body.dump());
  ASSERT_EQ(streamed->status, 200);
  json got = {{"tokens", json::array()},
              {"token_logprobs", json::array()},
              {"top_logprobs", json::array()},
              {"text_offset", json::array()}};
  for (const auto& e : sse_events(streamed->body)) {
    if (e["choices"].empty() || e["choices"][0]["logprobs"].is_null()) continue;
    for (const char* key : {"tokens", "token_logprobs", "top_logprobs", "text_offset"}) {
      for (const auto& v : e["choices"][0]["logprobs"][key]) got[key].push_back(v);
    }
  }
  EXPECT_EQ(got["tokens"], want["tokens"]);
  EXPECT_EQ(got["token_logprobs"], want["token_logprobs"]);
  EXPECT_EQ(got["top_logprobs"], want["top_logprobs"]);
  EXPECT_EQ(got["text_offset"], want["text_offset"]);
}

TEST_F(StreamLogprobs, Chat) {
  start();
  json body = {{"messages", {{{"role", "user"}, {"content", "x"}}}},
               {"max_tokens", 20},
               {"logprobs", true},
               {"top_logprobs", 2},
               {"stop", stops_for(codec_.encode_chat({{"user", "x"}}))}};
  auto whole = post("/v1/chat/completions", body.dump());
  ASSERT_EQ(whole->status, 200) << whole->body;
  const json want = json::parse(whole->body)["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(want.size(), 13u);

  body["stream"] = true;
  auto streamed = post("/v1/chat/completions", body.dump());
  json got = json::array();
  for (const auto& e : sse_events(streamed->body)) {
    if (e["choices"].empty() || e["choices"][0]["logprobs"].is_null()) continue;
    for (const auto& v : e["choices"][0]["logprobs"]["content"]) got.push_back(v);
  }
  EXPECT_EQ(got, want);
}

TEST_F(StreamLogprobs, NativeIsCumulative) {
  start();
  json body = {{"input_ids", {5, 6}},
               {"sampling_params", {{"max_new_tokens", 20}, {"stop", stops_for({5, 6})}}},
               {"return_logprob", true},
               {"top_logprobs_num", 2}};
  auto whole = post("/generate", body.dump());
  ASSERT_EQ(whole->status, 200) << whole->body;
  const json want = json::parse(whole->body)["meta_info"]["output_token_logprobs"];
  ASSERT_EQ(want.size(), 13u);
  body["stream"] = true;
  auto events = sse_events(post("/generate", body.dump())->body);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back()["meta_info"]["output_token_logprobs"], want);
}

}  // namespace
}  // namespace kiln::server
