// Limits enforced before expensive work: a prompt that cannot fit is refused before it is
// tokenized, stop strings are capped, one request cannot ask for more sequences than the queue.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "server/server_fixture.h"

namespace kiln::server {
namespace {

using nlohmann::json;
using testing::ServerFixture;

class HttpLimits : public ServerFixture {};

void expect_400(const std::optional<HttpResponse>& r, const std::string& param,
                const std::string& words) {
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  auto e = json::parse(r->body)["error"];
  EXPECT_EQ(e["param"], param) << r->body;
  EXPECT_NE(e["message"].get<std::string>().find(words), std::string::npos) << r->body;
}

TEST_F(HttpLimits, PromptTooLongIsRefusedBeforeTokenizing) {
  start();  // context 64 tokens; the fake codec's tokens are one byte each
  const std::string big(100000, 'x');
  size_t before = codec_.encoded_bytes;
  expect_400(post("/generate", json({{"text", big}}).dump()), "text", "at least 100000 tokens");
  expect_400(post("/v1/completions", json({{"prompt", {"a", big}}}).dump()), "prompt[1]",
             "at least 100000 tokens");
  EXPECT_EQ(codec_.encoded_bytes - before, 1u);  // only the "a" before the long prompt
  // At the bound (63 bytes: 63 tokens + BOS = 64, still too long) the tokenizer decides.
  expect_400(post("/generate", json({{"text", std::string(63, 'x')}}).dump()), "text",
             "context length");
  auto ok = post(
      "/generate",
      json({{"text", std::string(40, 'x')}, {"sampling_params", {{"max_new_tokens", 2}}}}).dump());
  EXPECT_EQ(ok->status, 200) << ok->body;
}

TEST_F(HttpLimits, ChatTooLongIsRefusedBeforeTokenizing) {
  start();
  size_t before = codec_.encoded_bytes;
  expect_400(
      post(
          "/v1/chat/completions",
          json({{"messages", {{{"role", "user"}, {"content", std::string(100000, 'x')}}}}}).dump()),
      "messages", "more than the 63 tokens");
  EXPECT_EQ(codec_.encoded_bytes, before);
}

TEST_F(HttpLimits, MaxPromptTokensTightensTheByteBound) {
  ServerOptions o;
  o.max_prompt_tokens = 10;
  start(o);
  size_t before = codec_.encoded_bytes;
  expect_400(post("/generate", json({{"text", std::string(11, 'x')}}).dump()), "text",
             "more than the 10 tokens");
  EXPECT_EQ(codec_.encoded_bytes, before);
}

TEST_F(HttpLimits, StopStringsAreCapped) {
  start();
  json many = json::array();
  for (int i = 0; i < 65; ++i) many.push_back(fmt::format("s{}", i));
  expect_400(post("/v1/completions", json({{"prompt", "a"}, {"stop", many}}).dump()), "stop",
             "65 stop strings, more than 64");
  expect_400(post("/generate", json({{"text", "a"}, {"sampling_params", {{"stop", many}}}}).dump()),
             "sampling_params.stop", "more than 64");
  json heavy = json::array();
  for (int i = 0; i < 2; ++i) heavy.push_back(std::string(40000, 'z'));
  expect_400(
      post("/v1/chat/completions",
           json({{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"stop", heavy}}).dump()),
      "stop", "80000 bytes of stop strings, more than 65536");
  many.erase(many.end() - 1);  // 64 is fine
  auto ok =
      post("/v1/completions", json({{"prompt", "a"}, {"stop", many}, {"max_tokens", 2}}).dump());
  EXPECT_EQ(ok->status, 200) << ok->body;
}

TEST_F(HttpLimits, SequencesPerRequestAreCapped) {
  ServerOptions o;
  o.max_request_sequences = 8;
  start(o);
  expect_400(post("/v1/completions",
                  json({{"prompt", {"a", "b", "c"}}, {"n", 3}, {"max_tokens", 1}}).dump()),
             "n", "asks for 9 sequences");
  expect_400(post("/v1/chat/completions",
                  json({{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"n", 9}}).dump()),
             "n", "asks for 9 sequences");
  expect_400(post("/generate", json({{"text", {"a", "b", "c"}},
                                     {"sampling_params", {{"n", 3}, {"max_new_tokens", 1}}}})
                                   .dump()),
             "sampling_params.n", "queue of 8");
  auto ok =
      post("/v1/completions", json({{"prompt", {"a", "b"}}, {"n", 4}, {"max_tokens", 1}}).dump());
  EXPECT_EQ(ok->status, 200) << ok->body;
}

}  // namespace
}  // namespace kiln::server
