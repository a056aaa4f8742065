#include "kiln/server/http_server.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <thread>

#include "server/server_fixture.h"

namespace kiln::server {
namespace {

using nlohmann::json;
using testing::FakeCodec;
using testing::FakeEngine;

using ServerTest = testing::ServerFixture;

std::vector<int32_t> ids_of(const FakeCodec& c, const std::string& text) {
  return c.encode(text, true);
}

TEST_F(ServerTest, HealthAndUnknownRoutes) {
  start();
  auto c = client();
  auto h = c.get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  auto nf = c.get("/nope");
  ASSERT_TRUE(nf);
  EXPECT_EQ(nf->status, 404);
  EXPECT_EQ(json::parse(nf->body)["error"]["code"], 404);
  auto wm = c.get("/generate");
  ASSERT_TRUE(wm);
  EXPECT_EQ(wm->status, 405);
  EXPECT_EQ(wm->headers.get("Allow"), "POST");
  EXPECT_TRUE(json::parse(wm->body)["error"]["message"].is_string());
  auto hg = c.get("/health_generate");
  ASSERT_TRUE(hg);
  EXPECT_EQ(hg->status, 200);
}

TEST_F(ServerTest, GenerateText) {
  start();
  auto r = post("/generate", R"({"text": "hi", "sampling_params": {"max_new_tokens": 5}})");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  auto j = json::parse(r->body);
  EXPECT_EQ(j["text"], FakeEngine::expected_text(ids_of(codec_, "hi"), 5));
  EXPECT_EQ(j["output_ids"].size(), 5u);
  const auto& m = j["meta_info"];
  EXPECT_EQ(m["finish_reason"]["type"], "length");
  EXPECT_EQ(m["finish_reason"]["length"], 5);
  EXPECT_EQ(m["prompt_tokens"], 3);
  EXPECT_EQ(m["completion_tokens"], 5);
  EXPECT_EQ(m["cached_tokens"], 0);
  EXPECT_TRUE(m["e2e_latency"].is_number());
  EXPECT_TRUE(m["id"].is_string());
}

TEST_F(ServerTest, GenerateStopStringAndLogprobs) {
  start();
  std::string full = FakeEngine::expected_text({5, 6}, 10);
  std::string stop = full.substr(3, 2);  // ends the output before its 4th letter
  auto r = post("/generate", json({{"input_ids", {5, 6}},
                                   {"sampling_params", {{"max_new_tokens", 10}, {"stop", stop}}},
                                   {"return_logprob", true},
                                   {"top_logprobs_num", 2}})
                                 .dump());
  ASSERT_EQ(r->status, 200) << r->body;
  auto j = json::parse(r->body);
  EXPECT_EQ(j["text"], full.substr(0, full.find(stop)));
  EXPECT_EQ(j["meta_info"]["finish_reason"]["type"], "stop");
  EXPECT_EQ(j["meta_info"]["finish_reason"]["matched"], stop);
  const auto& lps = j["meta_info"]["output_token_logprobs"];
  ASSERT_EQ(lps.size(), j["meta_info"]["completion_tokens"].get<size_t>());
  EXPECT_FLOAT_EQ(lps[0][0].get<float>(), -0.5f);
  EXPECT_EQ(j["meta_info"]["output_top_logprobs"][0].size(), 2u);
}

TEST_F(ServerTest, GenerateBatchAndN) {
  start();
  auto r =
      post("/generate",
           R"({"text": ["a", "bb"], "sampling_params": {"max_new_tokens": 3, "n": 2, "seed": 1}})");
  ASSERT_EQ(r->status, 200) << r->body;
  auto j = json::parse(r->body);
  ASSERT_TRUE(j.is_array());
  ASSERT_EQ(j.size(), 4u);
  // Prompt-major order; sample k of a prompt uses seed + k.
  EXPECT_EQ(j[0]["text"], FakeEngine::expected_text(ids_of(codec_, "a"), 3, 1));
  EXPECT_EQ(j[1]["text"], FakeEngine::expected_text(ids_of(codec_, "a"), 3, 2));
  EXPECT_EQ(j[2]["text"], FakeEngine::expected_text(ids_of(codec_, "bb"), 3, 1));
  EXPECT_EQ(j[3]["text"], FakeEngine::expected_text(ids_of(codec_, "bb"), 3, 2));
}

TEST_F(ServerTest, GenerateStreamIsCumulative) {
  start();
  auto r = post("/generate",
                R"({"text": "s", "stream": true, "sampling_params": {"max_new_tokens": 4}})");
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->headers.get("Content-Type"), "text/event-stream");
  bool done = false;
  auto events = sse_events(r->body, &done);
  EXPECT_TRUE(done);
  ASSERT_EQ(events.size(), 4u);
  std::string expect = FakeEngine::expected_text(ids_of(codec_, "s"), 4);
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i]["text"], expect.substr(0, i + 1));
    EXPECT_EQ(events[i]["meta_info"]["finish_reason"].is_null(), i + 1 < events.size());
  }
  EXPECT_EQ(events.back()["meta_info"]["finish_reason"]["type"], "length");
}

TEST_F(ServerTest, ErrorsAreJsonWithStatus) {
  ServerOptions o;
  o.max_body_bytes = 1000;
  start(o);
  auto expect_error = [&](const std::string& body, int status, const char* param) {
    auto r = post("/generate", body);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, status) << body << " -> " << r->body;
    auto j = json::parse(r->body);
    EXPECT_TRUE(j["error"]["message"].is_string());
    if (param) {
      EXPECT_EQ(j["error"]["param"], param) << r->body;
    }
  };
  expect_error("{not json", 400, nullptr);
  expect_error("", 400, nullptr);
  expect_error("{\"text\": \"\xff\xfe\"}", 400, nullptr);  // invalid UTF-8
  expect_error(R"({"text": "a", "sampling_params": {"temperature": "hot"}})", 400,
               "sampling_params.temperature");
  expect_error(R"({"text": "a", "sampling_params": {"max_new_tokens": -5}})", 400,
               "sampling_params.max_new_tokens");
  expect_error(R"({"text": "a", "sampling_params": {"max_new_tokens": 1000000}})", 400,
               "sampling_params.max_new_tokens");
  expect_error(json({{"text", std::string(100, 'x')}}).dump(), 400, "text");  // over the context
  expect_error(json({{"text", std::string(2000, 'x')}}).dump(), 413, nullptr);
  // The server is still fine.
  auto ok = post("/generate", R"({"text": "a", "sampling_params": {"max_new_tokens": 1}})");
  EXPECT_EQ(ok->status, 200);
}

TEST_F(ServerTest, ApiKey) {
  ServerOptions o;
  o.api_key = "sekret";
  start(o);
  auto c = client();
  EXPECT_EQ(c.get("/health")->status, 200);
  auto denied = c.get("/get_model_info");
  EXPECT_EQ(denied->status, 401);
  EXPECT_EQ(json::parse(denied->body)["error"]["type"], "authentication_error");
  HttpHeaders h = {{"Authorization", "Bearer sekret"}};
  auto ok = c.get("/get_model_info", h);
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(json::parse(ok->body)["model_path"], "/models/fake.gguf");
  EXPECT_EQ(c.get("/get_model_info", {{"Authorization", "Bearer nope"}})->status, 401);
}

TEST_F(ServerTest, QueueFullIs503) {
  start({}, /*step_ms=*/20, /*max_queued=*/1);
  std::thread slow(
      [&] { post("/generate", R"({"text": "a", "sampling_params": {"max_new_tokens": 20}})"); });
  while (engine_->active() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  auto r = post("/generate", R"({"text": "b"})");
  EXPECT_EQ(r->status, 503);
  EXPECT_TRUE(json::parse(r->body)["error"]["message"].is_string());
  slow.join();
}

TEST_F(ServerTest, ClientDisconnectCancels) {
  start({}, /*step_ms=*/5);
  {
    int pieces = 0;
    // Returning false from the body writer closes the connection after three pieces.
    const BodyWriter stop_early = [&](std::string_view) { return ++pieces < 3; };
    client().send("POST", "/generate", {{"Content-Type", "application/json"}},
                  R"({"text": "a", "stream": true, "sampling_params": {"max_new_tokens": 50}})",
                  &stop_early);
  }
  // The server notices at its next write and cancels the request long before 50 tokens.
  for (int i = 0; i < 200 && engine_->aborted() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(engine_->aborted(), 1);
  EXPECT_TRUE(server_->wait_idle(std::chrono::seconds(2)));
  // The cancelled request's final event was collected: it is counted as an abort.
  auto m = client().get("/metrics");
  EXPECT_NE(m->body.find("kiln_requests_total{finish_reason=\"abort\"} 1"), std::string::npos);
}

TEST_F(ServerTest, ShutdownEndsStreamsWithAbort) {
  start({}, /*step_ms=*/10);
  std::string body;
  std::thread t([&] {
    auto r = post("/generate",
                  R"({"text": "a", "stream": true, "sampling_params": {"max_new_tokens": 60}})");
    if (r) body = r->body;
  });
  while (engine_->active() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  engine_->shutdown();  // what `kiln serve` does on SIGTERM, before stopping the server
  EXPECT_TRUE(server_->wait_idle(std::chrono::seconds(5)));
  t.join();
  bool done = false;
  auto events = sse_events(body, &done);
  EXPECT_TRUE(done);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back()["meta_info"]["finish_reason"]["type"], "abort");
}

TEST_F(ServerTest, OpenAICompletions) {
  start();
  auto r = post("/v1/completions",
                R"({"model": "fake-model", "prompt": "hi", "max_tokens": 4, "logprobs": 1})");
  ASSERT_EQ(r->status, 200) << r->body;
  auto j = json::parse(r->body);
  EXPECT_EQ(j["object"], "text_completion");
  EXPECT_EQ(j["model"], "fake-model");
  EXPECT_EQ(j["choices"][0]["text"], FakeEngine::expected_text(ids_of(codec_, "hi"), 4));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(j["choices"][0]["logprobs"]["tokens"].size(), 4u);
  EXPECT_EQ(j["usage"]["prompt_tokens"], 3);
  EXPECT_EQ(j["usage"]["completion_tokens"], 4);
  EXPECT_EQ(j["usage"]["total_tokens"], 7);

  auto s = post("/v1/completions",
                R"({"prompt": "hi", "max_tokens": 4, "stream": true, "n": 2,
                    "stream_options": {"include_usage": true}})");
  ASSERT_EQ(s->status, 200) << s->body;
  bool done = false;
  auto events = sse_events(s->body, &done);
  EXPECT_TRUE(done);
  std::string text0;
  for (const auto& e : events) {
    if (!e["choices"].empty() && e["choices"][0]["index"] == 0) text0 += e["choices"][0]["text"];
  }
  EXPECT_EQ(text0, FakeEngine::expected_text(ids_of(codec_, "hi"), 4));
  EXPECT_TRUE(events.back()["choices"].empty());
  EXPECT_EQ(events.back()["usage"]["completion_tokens"], 8);
  EXPECT_EQ(events.back()["usage"]["prompt_tokens"], 3);  // the prompt counts once
}

TEST_F(ServerTest, OpenAIChat) {
  start({}, 1, 1000, /*eos_after=*/3);
  auto body = R"({"messages": [{"role": "user", "content": "x"}]})";
  auto r = post("/v1/chat/completions", body);
  ASSERT_EQ(r->status, 200) << r->body;
  auto j = json::parse(r->body);
  auto prompt = codec_.encode_chat({{"user", "x"}});
  EXPECT_EQ(j["object"], "chat.completion");
  EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(j["choices"][0]["message"]["content"], FakeEngine::expected_text(prompt, 3));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  // Without max_tokens the limit is the room left in the context.
  EXPECT_EQ(engine_->last_request().stop.max_new_tokens, 64 - static_cast<int>(prompt.size()));

  auto s = post("/v1/chat/completions",
                R"({"messages": [{"role": "user", "content": "x"}], "stream": true,
                    "logprobs": true, "top_logprobs": 1})");
  bool done = false;
  auto events = sse_events(s->body, &done);
  EXPECT_TRUE(done);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events[0]["choices"][0]["delta"]["role"], "assistant");
  std::string text;
  for (const auto& e : events) {
    const auto& d = e["choices"][0]["delta"];
    if (d.contains("content")) text += d["content"].get<std::string>();
  }
  EXPECT_EQ(text, FakeEngine::expected_text(prompt, 3));
  EXPECT_EQ(events.back()["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(events[1]["choices"][0]["logprobs"]["content"][0]["top_logprobs"].size(), 1u);

  auto models = client().get("/v1/models");
  EXPECT_EQ(json::parse(models->body)["data"][0]["id"], "fake-model");
}

TEST_F(ServerTest, TokenizeDetokenize) {
  start();
  auto t = post("/tokenize", R"({"prompt": "ab"})");
  ASSERT_EQ(t->status, 200) << t->body;
  auto j = json::parse(t->body);
  EXPECT_EQ(j["tokens"], json(codec_.encode("ab", true)));
  EXPECT_EQ(j["count"], 3);
  EXPECT_EQ(j["max_model_len"], 64);
  auto d = post("/detokenize", json({{"tokens", j["tokens"]}}).dump());
  EXPECT_EQ(json::parse(d->body)["text"], "ab");
  EXPECT_EQ(post("/detokenize", R"({"tokens": [1000]})")->status, 400);
}

TEST_F(ServerTest, MetricsAndFlush) {
  start();
  post("/generate", R"({"text": "a", "sampling_params": {"max_new_tokens": 2}})");
  auto m = client().get("/metrics");
  ASSERT_EQ(m->status, 200);
  EXPECT_NE(m->body.find("kiln_requests_total{finish_reason=\"length\"} 1"), std::string::npos)
      << m->body;
  EXPECT_NE(m->body.find("kiln_time_to_first_token_seconds_count 1"), std::string::npos);
  EXPECT_NE(m->body.find("kiln_inter_token_latency_seconds_count 1"), std::string::npos);
  EXPECT_NE(m->body.find("kiln_kv_pages_free 100"), std::string::npos);
  auto f = client().post("/flush_cache");
  EXPECT_EQ(f->status, 200);
}

}  // namespace
}  // namespace kiln::server
