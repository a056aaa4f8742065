// Reading Mistral's [TOOL_CALLS] JSON arrays out of a reply, whole and streamed.
#include <gtest/gtest.h>

#include "kiln/server/tool_call_stream.h"

namespace kiln::server {
namespace {

using nlohmann::json;
constexpr ToolCallFormat kMistral = ToolCallFormat::kMistral;

ToolReply parse(std::string_view text, bool opened = false, size_t max_calls = SIZE_MAX) {
  return parse_tool_reply(text, opened, max_calls, kMistral);
}

TEST(MistralToolCalls, ArrayAfterTextIsCalls) {
  const ToolReply r = parse(
      "Let me check. [TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\", \"n\": {\"a\": [1, \"]}\"]}}}, {\"name\": \"now\", \"arguments\": {}, "
      "\"id\": \"a1B2c3D4e\"}]");
  EXPECT_EQ(r.content, "Let me check.");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, R"({"city": "Paris", "n": {"a": [1, "]}"]}})");
  EXPECT_EQ(r.calls[1].name, "now");
  EXPECT_EQ(r.calls[1].arguments, "{}");
  EXPECT_TRUE(r.calls[1].id.starts_with("call_"));  // kiln's id, not the model's
}

TEST(MistralToolCalls, OpenedArrayAndNoText) {
  ToolReply r = parse(R"( [{"name": "f", "arguments": {"x": 1}}])", true);
  EXPECT_FALSE(r.content.has_value());
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, R"({"x": 1})");
  r = parse("[TOOL_CALLS][{\"arguments\": {\"b\": 1, \"a\": 2}, \"name\": \"f\"}]");
  ASSERT_EQ(r.calls.size(), 1u);  // arguments first: re-serialized
  EXPECT_EQ(r.calls[0].arguments, R"({"b":1,"a":2})");
}

TEST(MistralToolCalls, NotAnArrayOfCallsLeavesTheReplyAsText) {
  for (const std::string text :
       {"[TOOL_CALLS] {\"name\": \"f\", \"arguments\": {}}", "[TOOL_CALLS][{\"name\": \"f\"}]",
        "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}, \"x\": 1}]",
        "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}, \"arguments\": 2}]",
        "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": 1}",
        "[TOOL_CALLS][{\"name\": "
        "\"f\", \"arguments\": {}} {}]"}) {
    const ToolReply r = parse(text);
    EXPECT_TRUE(r.calls.empty()) << text;
    EXPECT_EQ(r.content, text);
  }
  const ToolReply r = parse("no calls [TOOL_CALL");
  EXPECT_EQ(r.content, "no calls [TOOL_CALL");
}

TEST(MistralToolCalls, MaxCallsKeepsTheFirst) {
  const ToolReply r = parse(
      "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}, {\"name\": \"g\", \"arguments\": "
      "{}}] trailing",
      false, 1);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "f");
}

TEST(MistralToolCalls, EveryStreamSplitAssemblesToTheWholeReply) {
  const std::string text =
      "Checking.\n[TOOL_CALLS] [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"S\u00e3o "
      "\\\"P\\\"\", \"o\": {\"x\": [{}]}} , \"id\": \"abcdefghi\"}, {\"arguments\": {\"a\": 1}, "
      "\"name\": \"f\"}, {\"name\": \"now\", \"arguments\": {}}]";
  const ToolReply whole = parse(text);
  ASSERT_EQ(whole.calls.size(), 3u);
  EXPECT_EQ(whole.calls[0].arguments, R"({"city": "São \"P\"", "o": {"x": [{}]}})");
  for (size_t step = 1; step <= 9; ++step) {
    ToolCallStream stream(false, SIZE_MAX, kMistral);
    std::string content;
    std::vector<json> calls;
    auto take = [&](const ToolCallStream::Delta& d) {
      content += d.content;
      for (const json& c : d.tool_calls) {
        const size_t i = c.at("index");
        if (i == calls.size())
          calls.push_back(c);  // the first chunk: id, name, ""
        else
          calls[i]["function"]["arguments"] = calls[i]["function"]["arguments"].get<std::string>() +
                                              c["function"]["arguments"].get<std::string>();
      }
    };
    for (size_t i = 0; i < text.size(); i += step) take(stream.feed(text.substr(i, step)));
    take(stream.finish());
    EXPECT_FALSE(stream.any_invalid());
    EXPECT_EQ(content, "Checking.") << step;
    ASSERT_EQ(calls.size(), 3u) << step;
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(calls[i]["function"]["name"], whole.calls[i].name);
      EXPECT_EQ(calls[i]["function"]["arguments"], whole.calls[i].arguments) << step;
    }
  }
}

TEST(MistralToolCalls, ArgumentsStreamBeforeTheCallCloses) {
  ToolCallStream stream(true, SIZE_MAX, kMistral);
  auto d = stream.feed(R"([{"name": "f", "arguments": {"city": "Par)");
  ASSERT_EQ(d.tool_calls.size(), 2u);
  EXPECT_EQ(d.tool_calls[1]["function"]["arguments"], R"({"city": "Par)");
  d = stream.feed(R"(is"} )");
  EXPECT_EQ(d.tool_calls[0]["function"]["arguments"], R"(is"})");
  d = stream.feed("}]");
  EXPECT_TRUE(d.tool_calls.empty());
  EXPECT_TRUE(stream.finish().tool_calls.empty());
  EXPECT_FALSE(stream.any_invalid());
}

}  // namespace
}  // namespace kiln::server
