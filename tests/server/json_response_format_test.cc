// OpenAI's response_format and SGLang's sampling_params.json_schema: accepted forms become a
// compiled schema on the request; every refusal is a 400 naming the field, down to the
// unsupported schema keyword.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "kiln/engine/json/json_matcher.h"
#include "kiln/server/http_error.h"
#include "kiln/server/native_request_parser.h"
#include "kiln/server/openai_request_parser.h"
#include "server/parser_test_util.h"

namespace kiln::server {
namespace {

using nlohmann::json;

using testing::error_field;
using testing::limits;

std::string chat_with(const std::string& extra) {
  return R"({"messages": [{"role": "user", "content": "x"}], )" + extra + "}";
}

bool matches(const std::shared_ptr<const engine::JsonSchema>& s, const std::string& text) {
  engine::JsonMatcher m(s);
  return m.feed(text) && m.complete();
}

TEST(JsonResponseFormat, OpenAIJsonObjectAndJsonSchema) {
  auto text = parse_chat_request(json::parse(chat_with(R"("response_format": {"type": "text"})")),
                                 limits());
  EXPECT_EQ(text.options.sampling.json_schema, nullptr);
  auto obj = parse_chat_request(
      json::parse(chat_with(R"("response_format": {"type": "json_object"})")), limits());
  ASSERT_NE(obj.options.sampling.json_schema, nullptr);
  EXPECT_TRUE(matches(obj.options.sampling.json_schema, R"({"a":1})"));
  EXPECT_FALSE(matches(obj.options.sampling.json_schema, "[1]"));
  auto sch = parse_completion_request(json::parse(R"({"prompt": "a", "response_format":
      {"type": "json_schema", "json_schema": {"name": "n", "strict": true,
       "schema": {"type": "object", "properties": {"x": {"type": "integer"}},
                  "required": ["x"]}}}})"),
                                      limits());
  ASSERT_NE(sch.options.sampling.json_schema, nullptr);
  EXPECT_TRUE(matches(sch.options.sampling.json_schema, R"({"x":3})"));
  EXPECT_FALSE(matches(sch.options.sampling.json_schema, R"({"x":"3"})"));
}

TEST(JsonResponseFormat, OpenAIErrorsNameTheField) {
  auto chat_error = [](const std::string& extra) {
    return error_field([&] { parse_chat_request(json::parse(chat_with(extra)), limits()); });
  };
  EXPECT_EQ(chat_error(R"("response_format": {"type": "yaml"})"), "response_format.type");
  EXPECT_EQ(chat_error(R"("response_format": {})"), "response_format.type");
  EXPECT_EQ(chat_error(R"("response_format": "json")"), "response_format");
  EXPECT_EQ(chat_error(R"("response_format": {"type": "json_schema"})"),
            "response_format.json_schema");
  EXPECT_EQ(chat_error(R"("response_format": {"type": "json_schema", "json_schema": {}})"),
            "response_format.json_schema.schema");
  EXPECT_EQ(chat_error(R"("response_format": {"type": "json_schema", "json_schema":
      {"name": "n", "schema": {"type": "object", "properties":
       {"name": {"type": "string", "pattern": "(a)\\1"}}}}})"),
            "response_format.json_schema.schema.properties.name.pattern");
  EXPECT_EQ(chat_error(R"("response_format": {"type": "json_object"}, "min_tokens": 3)"),
            "min_tokens");
  EXPECT_EQ(chat_error(R"("response_format": {"type": "json_object"}, "ignore_eos": true)"),
            "ignore_eos");
  EXPECT_EQ(error_field([] {
              parse_completion_request(
                  json::parse(R"({"prompt": "a", "response_format": {"type": "json_schema",
                      "json_schema": {"schema": {"type": "number", "multipleOf": 1}}}})"),
                  limits());
            }),
            "response_format.json_schema.schema.multipleOf");
}

TEST(JsonResponseFormat, SGLangJsonSchemaString) {
  auto r = parse_native_generate(json::parse(R"({"text": "a", "sampling_params":
      {"json_schema": "{\"type\": \"array\", \"items\": {\"type\": \"boolean\"}}"}})"),
                                 limits());
  ASSERT_NE(r.options[0].sampling.json_schema, nullptr);
  EXPECT_TRUE(matches(r.options[0].sampling.json_schema, "[true,false]"));
  auto native_error = [](const std::string& params) {
    return error_field([&] {
      parse_native_generate(json::parse(R"({"text": "a", "sampling_params": )" + params + "}"),
                            limits());
    });
  };
  EXPECT_EQ(native_error(R"({"json_schema": "{not json"})"), "sampling_params.json_schema");
  EXPECT_EQ(native_error(R"({"json_schema": {"type": "object"}})"), "sampling_params.json_schema");
  EXPECT_EQ(native_error(R"({"json_schema": "{\"type\": \"string\", \"format\": \"uri\"}"})"),
            "sampling_params.json_schema.format");
  EXPECT_EQ(native_error(R"({"json_schema": "{}", "ignore_eos": true})"),
            "sampling_params.ignore_eos");
  // A JSON schema and a grammar are two constraints.
  EXPECT_EQ(native_error(R"({"json_schema": "{}", "regex": "a+"})"), "sampling_params.regex");
}

}  // namespace
}  // namespace kiln::server
