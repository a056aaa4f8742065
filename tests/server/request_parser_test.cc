#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "kiln/server/http_error.h"
#include "kiln/server/native_request_parser.h"
#include "kiln/server/openai_request_parser.h"
#include "kiln/server/request_builder.h"
#include "server/parser_test_util.h"

namespace kiln::server {
namespace {

using nlohmann::json;

using testing::error_field;
using testing::limits;

std::string native_error(const std::string& body) {
  return error_field([&] { parse_native_generate(json::parse(body), limits()); });
}

TEST(NativeParser, SingleTextWithSamplingParams) {
  auto r = parse_native_generate(
      json::parse(R"({"text": "hi", "sampling_params": {"max_new_tokens": 7, "temperature": 0,
                      "top_p": 0.5, "top_k": 3, "min_p": 0.1, "stop": "x", "stop_token_ids": [5],
                      "ignore_eos": true, "n": 2, "seed": 9, "repetition_penalty": 1.1}})"),
      limits());
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_FALSE(r.is_batch);
  EXPECT_TRUE(r.prompts[0].is_text);
  EXPECT_EQ(r.prompts[0].text, "hi");
  const auto& o = r.options[0];
  EXPECT_EQ(o.stop.max_new_tokens, 7);
  EXPECT_TRUE(o.max_new_tokens_given);
  EXPECT_EQ(o.sampling.temperature, 0.0);
  EXPECT_EQ(o.sampling.top_p, 0.5);
  EXPECT_EQ(o.sampling.top_k, 3);
  EXPECT_EQ(o.stop.stop_strings, std::vector<std::string>{"x"});
  EXPECT_EQ(o.stop.stop_token_ids, std::vector<int32_t>{5});
  EXPECT_TRUE(o.stop.ignore_eos);
  EXPECT_EQ(o.n, 2);
  EXPECT_EQ(*o.sampling.seed, 9u);
}

TEST(NativeParser, DefaultsMatchSGLang) {
  auto r = parse_native_generate(json::parse(R"({"input_ids": [1, 2, 3]})"), limits());
  EXPECT_FALSE(r.prompts[0].is_text);
  EXPECT_EQ(r.prompts[0].ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(r.options[0].stop.max_new_tokens, 128);
  EXPECT_FALSE(r.options[0].max_new_tokens_given);
  EXPECT_EQ(r.options[0].n, 1);
  EXPECT_FALSE(r.stream);
  EXPECT_EQ(r.logprob_start_len, -1);
  auto lp = parse_native_generate(
      json::parse(R"({"input_ids": [1, 2], "return_logprob": true, "logprob_start_len": 1})"),
      limits());
  EXPECT_EQ(lp.logprob_start_len, 1);
  EXPECT_EQ(native_error(R"({"text": "a", "logprob_start_len": -2})"), "logprob_start_len");
  EXPECT_EQ(native_error(R"({"text": "a", "logprob_start_len": "0"})"), "logprob_start_len");
}

TEST(NativeParser, Batches) {
  auto r = parse_native_generate(json::parse(R"({"text": ["a", "b", "c"]})"), limits());
  EXPECT_TRUE(r.is_batch);
  EXPECT_EQ(r.prompts.size(), 3u);
  EXPECT_EQ(r.options.size(), 3u);
  auto ids = parse_native_generate(json::parse(R"({"input_ids": [[1], [2, 3]],
      "sampling_params": [{"max_new_tokens": 1}, {"max_new_tokens": 2}]})"),
                                   limits());
  EXPECT_TRUE(ids.is_batch);
  EXPECT_EQ(ids.options[1].stop.max_new_tokens, 2);
}

TEST(NativeParser, RejectsWrongTypesNamingTheField) {
  EXPECT_EQ(native_error(R"({"text": 5})"), "text");
  EXPECT_EQ(native_error(R"({"text": ["a", 1]})"), "text[1]");
  EXPECT_EQ(native_error(R"({"text": "a", "input_ids": [1]})"), "text");
  EXPECT_EQ(native_error(R"({})"), "text");
  EXPECT_EQ(native_error(R"({"input_ids": [1, "x"]})"), "input_ids[1]");
  EXPECT_EQ(native_error(R"({"input_ids": [1, 300]})"), "input_ids[1]");
  EXPECT_EQ(native_error(R"({"input_ids": [-1]})"), "input_ids[0]");
  EXPECT_EQ(native_error(R"({"input_ids": []})"), "input_ids");
  EXPECT_EQ(native_error(R"({"text": "a", "sampling_params": 3})"), "sampling_params");
  EXPECT_EQ(native_error(R"({"text": "a", "sampling_params": {"temperature": "hot"}})"),
            "sampling_params.temperature");
  EXPECT_EQ(native_error(R"({"text": "a", "sampling_params": {"temperature": -1}})"),
            "sampling_params.temperature");
  EXPECT_EQ(native_error(R"({"text": "a", "sampling_params": {"top_p": 0}})"),
            "sampling_params.top_p");
  EXPECT_EQ(native_error(R"({"text": "a", "sampling_params": {"top_k": -2}})"),
            "sampling_params.top_k");
  EXPECT_EQ(native_error(R"({"text": "a", "sampling_params": {"max_new_tokens": -1}})"),
            "sampling_params.max_new_tokens");
  EXPECT_EQ(native_error(R"({"text": "a", "sampling_params": {"max_new_tokens": 1e30}})"),
            "sampling_params.max_new_tokens");
  EXPECT_EQ(native_error(R"({"text": "a", "sampling_params": {"max_new_tokens": 2.5}})"),
            "sampling_params.max_new_tokens");
  EXPECT_EQ(native_error(R"({"text": "a", "sampling_params": {"max_new_tokens": true}})"),
            "sampling_params.max_new_tokens");
  EXPECT_EQ(native_error(R"({"text": "a", "sampling_params": {"stop": [1]}})"),
            "sampling_params.stop[0]");
  EXPECT_EQ(native_error(R"({"text": "a", "sampling_params": {"stop": [""]}})"),
            "sampling_params.stop[0]");
  EXPECT_EQ(native_error(R"({"text": "a", "sampling_params": {"n": 0}})"), "sampling_params.n");
  EXPECT_EQ(native_error(R"({"text": "a", "sampling_params": {"max_tokens": 3}})"),
            "sampling_params.max_tokens");
  EXPECT_EQ(native_error(R"({"text": "a", "sampling_params": {"regex": "a(?=b)c"}})"),
            "sampling_params.regex");
  EXPECT_EQ(native_error(R"({"text": "a", "sampling_params": {"ebnf": "root ::= x"}})"),
            "sampling_params.ebnf");
  EXPECT_EQ(native_error(R"({"text": "a", "sampling_params": {"grammar": 3}})"),
            "sampling_params.grammar");
  EXPECT_EQ(native_error(R"({"text": "a", "sampling_params":
      {"min_new_tokens": 5, "max_new_tokens": 2}})"),
            "sampling_params.min_new_tokens");
  EXPECT_EQ(native_error(R"({"text": "a", "stream": "yes"})"), "stream");
  EXPECT_EQ(native_error(R"({"text": "a", "top_logprobs_num": -1})"), "top_logprobs_num");
  EXPECT_EQ(native_error(R"({"text": ["a"], "sampling_params": [{}, {}]})"), "sampling_params");
  EXPECT_EQ(native_error(R"([1, 2])"), "<no param>: the request body must be a JSON object");
}

TEST(NativeParser, AcceptsInertDefaultsOfUnsupportedParams) {
  auto r = parse_native_generate(json::parse(R"({"text": "a", "sampling_params":
      {"regex": null, "json_schema": null, "no_stop_trim": false,
       "spaces_between_special_tokens": true, "stream_interval": 1, "max_new_tokens": 16.0}})"),
                                 limits());
  EXPECT_EQ(r.options[0].stop.max_new_tokens, 16);  // 16.0 is an integer
}

std::string openai_error(const std::string& body, bool chat) {
  return error_field([&] {
    if (chat) {
      parse_chat_request(json::parse(body), limits());
    } else {
      parse_completion_request(json::parse(body), limits());
    }
  });
}

TEST(OpenAIParser, Completion) {
  auto r = parse_completion_request(
      json::parse(R"({"model": "m", "prompt": ["a", "b"], "max_tokens": 5, "n": 2,
                      "stream": true, "stream_options": {"include_usage": true},
                      "logprobs": 2, "stop": ["x", "y"], "seed": 4, "temperature": 0.5})"),
      limits());
  EXPECT_EQ(r.prompts.size(), 2u);
  EXPECT_EQ(r.options.stop.max_new_tokens, 5);
  EXPECT_EQ(r.options.n, 2);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.logprobs, 2);
  EXPECT_EQ(r.options.stop.stop_strings.size(), 2u);
  auto d = parse_completion_request(json::parse(R"({"prompt": [1, 2]})"), limits());
  EXPECT_FALSE(d.prompts[0].is_text);
  EXPECT_EQ(d.options.stop.max_new_tokens, 16);  // OpenAI's default
  EXPECT_EQ(d.logprobs, -1);
  EXPECT_FALSE(d.echo);
  auto e = parse_completion_request(
      json::parse(R"({"prompt": "a", "echo": true, "logprobs": 1, "max_tokens": 0})"), limits());
  EXPECT_TRUE(e.echo);
  EXPECT_EQ(e.options.stop.max_new_tokens, 0);
}

TEST(OpenAIParser, CompletionErrors) {
  EXPECT_EQ(openai_error(R"({})", false), "prompt");
  EXPECT_EQ(openai_error(R"({"prompt": 3})", false), "prompt");
  EXPECT_EQ(openai_error(R"({"prompt": "a", "max_tokens": "5"})", false), "max_tokens");
  EXPECT_EQ(openai_error(R"({"prompt": "a", "logprobs": 6})", false), "logprobs");
  EXPECT_EQ(openai_error(R"({"prompt": "a", "echo": 1})", false), "echo");
  EXPECT_EQ(openai_error(R"({"prompt": "a", "stream_options": {"include_usage": 1}})", false),
            "stream_options.include_usage");
  EXPECT_EQ(openai_error(R"({"prompt": "a", "presence_penalty": 3})", false), "presence_penalty");
  EXPECT_EQ(openai_error(R"({"prompt": "a", "model": 1})", false), "model");
}

TEST(OpenAIParser, Chat) {
  auto r = parse_chat_request(json::parse(R"({"messages": [{"role": "system", "content": "s"},
                                   {"role": "user", "content": [{"type": "text", "text": "u"}]}],
                      "logprobs": true, "top_logprobs": 3})"),
                              limits());
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[1].content, "u");
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 3);
  EXPECT_FALSE(r.options.max_new_tokens_given);  // clamped to the context later
}

TEST(OpenAIParser, ChatErrors) {
  EXPECT_EQ(openai_error(R"({})", true), "messages");
  EXPECT_EQ(openai_error(R"({"messages": []})", true), "messages");
  EXPECT_EQ(openai_error(R"({"messages": [{"role": "robot", "content": "x"}]})", true),
            "messages[0].role");
  EXPECT_EQ(openai_error(R"({"messages": [{"role": "user"}]})", true), "messages[0].content");
  EXPECT_EQ(
      openai_error(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", true),
      "messages[0].content[0].type");
  EXPECT_EQ(
      openai_error(R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", true),
      "top_logprobs");
  EXPECT_EQ(
      openai_error(R"({"messages": [{"role": "user", "content": "x"}], "tools": [{}]})", true),
      "tools[0].type");
}

TEST(SamplingParser, LogitBiasInBothApis) {
  auto native = parse_native_generate(
      json::parse(R"({"text": "a", "sampling_params": {"logit_bias": {"5": 2.5, "0": -100}}})"),
      limits());
  auto bias = native.options[0].sampling.logit_bias;
  std::sort(bias.begin(), bias.end());
  ASSERT_EQ(bias.size(), 2u);
  EXPECT_EQ(bias[0], (std::pair<int32_t, float>{0, -100.0f}));
  EXPECT_EQ(bias[1], (std::pair<int32_t, float>{5, 2.5f}));
  auto chat = parse_chat_request(
      json::parse(R"({"messages": [{"role": "user", "content": "x"}], "logit_bias": {"7": 1}})"),
      limits());
  EXPECT_EQ(chat.options.sampling.logit_bias, (std::vector<std::pair<int32_t, float>>{{7, 1.0f}}));
  EXPECT_TRUE(
      parse_completion_request(json::parse(R"({"prompt": "a", "logit_bias": {}})"), limits())
          .options.sampling.logit_bias.empty());
  for (const char* bad : {R"({"x": 1})", R"({"-1": 1})", R"({"1e3": 1})", R"({"99999999999": 1})",
                          R"({"3": 101})", R"({"3": "high"})", R"([1, 2])"}) {
    SCOPED_TRACE(bad);
    const std::string body = std::string(R"({"prompt": "a", "logit_bias": )") + bad + "}";
    EXPECT_EQ(openai_error(body, false).rfind("logit_bias", 0), 0u) << openai_error(body, false);
  }
  const std::string oov =
      R"({"prompt": "a", "logit_bias": {")" + std::to_string(limits().vocab_size) + R"(": 1}})";
  EXPECT_EQ(openai_error(oov, false).rfind("logit_bias", 0), 0u);
}

TEST(RequestBuilder, ContextChecks) {
  GenerationOptions o;
  o.stop.max_new_tokens = 100;
  PromptLimits lim{50, 0};
  // A default max_new_tokens is clamped to the room left.
  auto r = make_engine_request({1, 2, 3}, o, 0, -1, lim, "text");
  EXPECT_EQ(r.stop.max_new_tokens, 47);
  // An explicit one that does not fit is an error naming it.
  o.max_new_tokens_given = true;
  EXPECT_EQ(error_field([&] {
              make_engine_request({1, 2, 3}, o, 0, -1, lim, "text");
            }),
            "max_new_tokens");
  // A prompt that fills the context is an error naming the prompt.
  EXPECT_EQ(error_field([&] {
              make_engine_request(std::vector<int32_t>(50, 1), o, 0, -1, lim, "input_ids[2]");
            }),
            "input_ids[2]");
  EXPECT_EQ(error_field([&] { make_engine_request({}, o, 0, -1, lim, "text"); }), "text");
  lim.max_prompt_tokens = 2;
  EXPECT_EQ(error_field([&] { make_engine_request({1, 2, 3}, o, 0, -1, lim, "text"); }), "text");
}

TEST(RequestBuilder, SeedPerSample) {
  GenerationOptions o;
  o.sampling.seed = 10;
  PromptLimits lim{100, 0};
  EXPECT_EQ(*make_engine_request({1}, o, 0, -1, lim, "t").sampling.seed, 10u);
  EXPECT_EQ(*make_engine_request({1}, o, 3, -1, lim, "t").sampling.seed, 13u);
}

}  // namespace
}  // namespace kiln::server
