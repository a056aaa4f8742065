// The tool-calling fields of a chat request: what is accepted, and the field each 400 names.
#include "kiln/server/tool_request.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "kiln/engine/json/json_matcher.h"
#include "kiln/server/http_error.h"
#include "kiln/server/openai_request_parser.h"
#include "server/parser_test_util.h"

namespace kiln::server {
namespace {

using nlohmann::json;
using testing::error_field;
using testing::limits;

const char* kWeather = R"({"type": "function", "function": {"name": "get_weather",
    "description": "d", "parameters": {"type": "object", "properties": {"city": {"type": "string"},
    "days": {"type": "integer", "minimum": 1, "maximum": 7}}, "required": ["city"]}}})";
const char* kNow = R"({"type": "function", "function": {"name": "now"}})";

json chat(const std::string& extra) {
  return json::parse(R"({"messages": [{"role": "user", "content": "x"}])" + extra + "}");
}
std::string chat_error(const std::string& extra) {
  return error_field([&] { parse_chat_request(chat(extra), limits()); });
}
std::string message_error(const std::string& messages, const std::string& extra = "") {
  return error_field([&] {
    parse_chat_request(json::parse(R"({"messages": )" + messages + extra + "}"), limits());
  });
}

TEST(ToolRequest, ToolsAndChoices) {
  auto r = parse_chat_request(chat(std::string(R"(, "tools": [)") + kWeather + ", " + kNow + "]"),
                              limits());
  ASSERT_EQ(r.tools.tools.size(), 2u);
  EXPECT_EQ(r.tools.tools[0].name, "get_weather");
  EXPECT_EQ(
      r.tools.tools[1].parameters,
      json({{"type", "object"}, {"properties", json::object()}, {"additionalProperties", false}}));
  EXPECT_EQ(r.tools.choice, ToolChoice::kAuto);
  EXPECT_TRUE(r.tools.parallel);
  // auto: free text, a call the model opens constrained from "<tool_call>" on.
  EXPECT_TRUE(r.options.sampling.json_schema);
  EXPECT_EQ(r.options.sampling.json_after, std::vector<std::string>{"<tool_call>"});
  // Qwen2.5-Coder's format: a ```json fence opens a call too, and is constrained the same way.
  ParseLimits coder = limits();
  coder.tool_calls = ToolCallFormat::kHermesFenced;
  const auto fenced =
      parse_chat_request(chat(std::string(R"(, "tools": [)") + kWeather + "]"), coder);
  EXPECT_TRUE(fenced.options.sampling.json_schema);
  EXPECT_EQ(fenced.options.sampling.json_after,
            (std::vector<std::string>{"<tool_call>", "```json\n"}));

  r = parse_chat_request(chat(std::string(R"(, "tools": [)") + kWeather +
                              R"(], "tool_choice": "required", "parallel_tool_calls": false)"),
                         limits());
  EXPECT_EQ(r.tools.choice, ToolChoice::kRequired);
  EXPECT_FALSE(r.tools.parallel);
  ASSERT_TRUE(r.options.sampling.json_schema);  // forced: constrained to the call

  r = parse_chat_request(
      chat(std::string(R"(, "tools": [)") + kWeather + ", " + kNow +
           R"(], "tool_choice": {"type": "function", "function": {"name": "now"}})"),
      limits());
  EXPECT_EQ(r.tools.choice, ToolChoice::kFunction);
  EXPECT_EQ(r.tools.function, "now");

  r = parse_chat_request(
      chat(std::string(R"(, "tools": [)") + kNow + R"(], "tool_choice": "none")"), limits());
  EXPECT_EQ(r.tools.choice, ToolChoice::kNone);
  EXPECT_FALSE(r.tools.parse_calls());
  EXPECT_FALSE(r.options.sampling.json_schema);

  // auto with a schema the compiler refuses: a 400 naming the keyword, as "required" answers
  // (it used to be accepted with argument checking silently off for every tool of the request).
  const std::string bad_tool = R"(, "tools": [{"type": "function", "function": {"name": "f",
      "parameters": {"type": "object", "properties": {"d": {"type": "string", "format":
      "hostname"}}}}}])";
  for (const char* choice : {"", R"(, "tool_choice": "auto")", R"(, "tool_choice": "required")"}) {
    try {
      parse_chat_request(chat(bad_tool + choice), limits());
      ADD_FAILURE() << "accepted with tool_choice " << choice;
    } catch (const HttpError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_EQ(e.param(), "tools[0].function.parameters.properties.d.format") << choice;
    }
  }
}

// The forced call's constraint accepts exactly a call of an allowed tool with valid arguments.
TEST(ToolRequest, ForcedCallSchemaConstrainsNameAndArguments) {
  auto r = parse_chat_request(
      chat(std::string(R"(, "tools": [)") + kWeather + ", " + kNow +
           R"(], "tool_choice": {"type": "function", "function": {"name": "get_weather"}})"),
      limits());
  auto accepts = [&](const std::string& text) {
    engine::JsonMatcher m(r.options.sampling.json_schema);
    return m.feed(text) && m.complete();
  };
  EXPECT_TRUE(accepts(R"({"name": "get_weather", "arguments": {"city": "Paris", "days": 3}})"));
  EXPECT_TRUE(accepts(R"({"name":"get_weather","arguments":{"city":"x"}})"));
  EXPECT_FALSE(accepts(R"({"name": "now", "arguments": {}})"));
  EXPECT_FALSE(accepts(R"({"name": "get_weather", "arguments": {"days": 3}})"));  // no city
  EXPECT_FALSE(accepts(R"({"name": "get_weather", "arguments": {"city": "P", "days": 9}})"));
  EXPECT_FALSE(accepts(R"({"name": "get_weather"})"));
}

// With several tools, the name picks which schema the arguments follow.
TEST(ToolRequest, RequiredCallArgumentsFollowTheNamedFunction) {
  auto r = parse_chat_request(
      chat(std::string(R"(, "tools": [)") + kWeather + ", " + kNow +
           R"(, {"type": "function", "function": {"name": "refs", "parameters": {"type":
           "object", "properties": {"x": {"$ref": "#/$defs/d"}}, "required": ["x"],
           "$defs": {"d": {"enum": [1, 2]}}}}}], "tool_choice": "required")"),
      limits());
  auto accepts = [&](const std::string& text) {
    engine::JsonMatcher m(r.options.sampling.json_schema);
    return m.feed(text) && m.complete();
  };
  auto prefix_ok = [&](const std::string& text) {
    engine::JsonMatcher m(r.options.sampling.json_schema);
    return m.feed(text);
  };
  EXPECT_TRUE(accepts(R"({"name": "get_weather", "arguments": {"city": "Paris", "days": 3}})"));
  EXPECT_TRUE(accepts(R"({"name": "now", "arguments": {}})"));
  EXPECT_TRUE(accepts(R"({"name": "refs", "arguments": {"x": 2}})"));
  EXPECT_FALSE(accepts(R"({"name": "refs", "arguments": {"x": 3}})"));
  EXPECT_FALSE(accepts(R"({"name": "now", "arguments": {"city": "Paris"}})"));
  EXPECT_FALSE(accepts(R"({"name": "get_weather", "arguments": {}})"));
  EXPECT_FALSE(accepts(R"({"name": "other", "arguments": {}})"));
  // The arguments key is refused before the name, at its first distinguishing byte.
  EXPECT_TRUE(prefix_ok(R"({")"));
  EXPECT_FALSE(prefix_ok(R"({"a)"));
  EXPECT_TRUE(prefix_ok(R"({"n)"));
}

// Llama 3.1's calls: {"name", "parameters"}; auto has no marker to constrain from.
TEST(ToolRequest, LlamaCallsUseParameters) {
  ParseLimits l = limits();
  l.tool_calls = ToolCallFormat::kLlamaJson;
  auto r = parse_chat_request(
      chat(std::string(R"(, "tools": [)") + kWeather + R"(], "tool_choice": "required")"), l);
  engine::JsonMatcher m(r.options.sampling.json_schema);
  EXPECT_TRUE(m.feed(R"({"name": "get_weather", "parameters": {"city": "Oslo"}})") && m.complete());
  engine::JsonMatcher a(r.options.sampling.json_schema);
  EXPECT_FALSE(a.feed(R"({"name": "get_weather", "arguments")"));
  r = parse_chat_request(chat(std::string(R"(, "tools": [)") + kWeather + "]"), l);
  EXPECT_FALSE(r.options.sampling.json_schema);
}

TEST(ToolRequest, Errors) {
  const std::string tools = std::string(R"(, "tools": [)") + kWeather + "]";
  EXPECT_EQ(chat_error(R"(, "tools": {})"), "tools");
  EXPECT_EQ(chat_error(R"(, "tools": [{"type": "retrieval"}])"), "tools[0].type");
  EXPECT_EQ(chat_error(R"(, "tools": [{"type": "function"}])"), "tools[0].function");
  EXPECT_EQ(chat_error(R"(, "tools": [{"type": "function", "function": {}}])"),
            "tools[0].function.name");
  EXPECT_EQ(chat_error(R"(, "tools": [{"type": "function", "function": {"name": "a b"}}])"),
            "tools[0].function.name");
  EXPECT_EQ(chat_error(std::string(R"(, "tools": [)") + kNow + ", " + kNow + "]"),
            "tools[1].function.name");
  EXPECT_EQ(chat_error(
                R"(, "tools": [{"type": "function", "function": {"name": "f", "parameters": 3}}])"),
            "tools[0].function.parameters");
  EXPECT_EQ(chat_error(tools + R"(, "tool_choice": "sometimes")"), "tool_choice");
  EXPECT_EQ(
      chat_error(tools + R"(, "tool_choice": {"type": "function", "function": {"name": "x"}})"),
      "tool_choice.function.name");
  EXPECT_EQ(chat_error(R"(, "tool_choice": "required")"), "tool_choice");
  EXPECT_EQ(chat_error(tools + R"(, "parallel_tool_calls": "yes")"), "parallel_tool_calls");
  // A forced call's schema must compile: the error names the keyword in the tool's parameters.
  EXPECT_EQ(chat_error(R"(, "tools": [{"type": "function", "function": {"name": "f", "parameters":
              {"type": "object", "properties": {"a": {"type": "string", "format": "uri"}}}}}],
              "tool_choice": "required")"),
            "tools[0].function.parameters.properties.a.format");
  EXPECT_EQ(chat_error(tools + R"(, "tool_choice": "required", "response_format":
              {"type": "json_object"})"),
            "response_format");
}

TEST(ToolRequest, HistoryWithCallsAndResults) {
  auto r = parse_chat_request(json::parse(R"({"messages": [
      {"role": "user", "content": "weather?"},
      {"role": "assistant", "content": null, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\",\"a\":[1,2.5]}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]})"),
                              limits());
  ASSERT_EQ(r.messages.size(), 3u);
  ASSERT_EQ(r.messages[1].tool_calls.size(), 1u);
  EXPECT_EQ(r.messages[1].content, "");
  EXPECT_EQ(r.messages[1].tool_calls[0].name, "get_weather");
  // As the template's tojson writes them: Python's separators, the model's key order.
  EXPECT_EQ(r.messages[1].tool_calls[0].arguments, R"({"city": "Paris", "a": [1, 2.5]})");
  EXPECT_EQ(r.messages[2].role, "tool");
  EXPECT_EQ(r.messages[2].content, "sunny");
}

TEST(ToolRequest, MalformedHistory) {
  const std::string call =
      R"({"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
          "function": {"name": "f", "arguments": "{}"}}]})";
  const std::string user = R"({"role": "user", "content": "x"})";
  EXPECT_EQ(message_error("[" + user + R"(, {"role": "tool", "content": "r"}])"),
            "messages[1].tool_call_id");
  EXPECT_EQ(message_error("[" + user + R"(, {"role": "tool", "tool_call_id": "c1"}])"),
            "messages[1].role");  // no call to answer
  EXPECT_EQ(
      message_error("[" + user + ", " + call + R"(, {"role": "tool", "tool_call_id": "c1"}])"),
      "messages[2].content");
  EXPECT_EQ(message_error("[" + user + ", " + call +
                          R"(, {"role": "tool", "tool_call_id": "c9", "content": "r"}])"),
            "messages[2].tool_call_id");
  EXPECT_EQ(message_error("[" + user + R"(, {"role": "assistant", "content": null}])"),
            "messages[1].content");
  EXPECT_EQ(message_error("[" + user + R"(, {"role": "assistant", "tool_calls": [{"type":
              "function", "function": {"name": "f", "arguments": "{not json"}}]}])"),
            "messages[1].tool_calls[0].function.arguments");
  EXPECT_EQ(message_error("[" + user + R"(, {"role": "assistant", "tool_calls": [{"type":
              "function", "function": {"name": "f", "arguments": {}}}]}])"),
            "messages[1].tool_calls[0].function.arguments");
  EXPECT_EQ(message_error("[" + user + R"(, {"role": "assistant", "tool_calls": [{"type":
              "function", "function": {"arguments": "{}"}}]}])"),
            "messages[1].tool_calls[0].function.name");
  EXPECT_EQ(message_error(R"([{"role": "user", "content": "x", "tool_calls": []}])"),
            "messages[0].tool_calls");
  // A user message closes the calls: a later tool message answers nothing.
  EXPECT_EQ(message_error("[" + user + ", " + call + ", " + user +
                          R"(, {"role": "tool", "tool_call_id": "c1", "content": "r"}])"),
            "messages[3].role");
}

}  // namespace
}  // namespace kiln::server
