// Reading Qwen 2.5 / Hermes <tool_call> blocks out of a reply, whole and streamed: the stream's
// chunks must assemble (as the openai client assembles them) into the whole reply's calls, for
// every way of cutting the text into pieces, and call text must never reach the content.
#include <gtest/gtest.h>

#include "kiln/server/tool_call_stream.h"

namespace kiln::server {
namespace {

using nlohmann::json;

TEST(ToolCallParser, PlainTextHasNoCalls) {
  ToolReply r = parse_tool_reply("Hello, no tools here. <tool", false);
  EXPECT_EQ(r.content, "Hello, no tools here. <tool");
  EXPECT_TRUE(r.calls.empty());
}

TEST(ToolCallParser, CallsAfterText) {
  ToolReply r = parse_tool_reply(
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\", \"n\": {\"a\": [1, 2]}}}\n</tool_call>\n<tool_call>\n{\"name\": \"now\", "
      "\"arguments\": {}}\n</tool_call>",
      false);
  EXPECT_EQ(r.content, "Let me check.");
  ASSERT_EQ(r.calls.size(), 2u);
  EXPECT_EQ(r.calls[0].name, "get_weather");
  EXPECT_EQ(r.calls[0].arguments, R"({"city": "Paris", "n": {"a": [1, 2]}})");
  EXPECT_EQ(r.calls[1].name, "now");
  EXPECT_EQ(r.calls[1].arguments, "{}");
  EXPECT_TRUE(r.calls[0].id.starts_with("call_"));
  EXPECT_NE(r.calls[0].id, r.calls[1].id);
  const json j = tool_calls_json(r.calls);
  EXPECT_EQ(j[0]["type"], "function");
  EXPECT_EQ(j[0]["function"]["name"], "get_weather");
}

TEST(ToolCallParser, NoTextBeforeTheCallIsNullContent) {
  ToolReply r =
      parse_tool_reply("\n<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>", false);
  EXPECT_FALSE(r.content.has_value());
  ASSERT_EQ(r.calls.size(), 1u);
}

TEST(ToolCallParser, OpenedCallEndsWithTheReply) {
  // A forced call: the prompt ended with "<tool_call>\n" and the JSON ends the reply.
  ToolReply r = parse_tool_reply(R"({"name": "f", "arguments": {"x": "}"}})", true);
  EXPECT_FALSE(r.content.has_value());
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].arguments, R"({"x": "}"})");
}

TEST(ToolCallParser, ArgumentsFirstIsReadWhole) {
  ToolReply r = parse_tool_reply(
      "<tool_call>\n{\"arguments\": {\"b\": 1, \"a\": 2}, \"name\": \"f\"}\n</tool_call>", false);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "f");
  EXPECT_EQ(r.calls[0].arguments, R"({"b":1,"a":2})");
}

TEST(ToolCallParser, InvalidCallLeavesTheReplyAsText) {
  for (const char* text :
       {"<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": }\n</tool_call>",
        "<tool_call>\nnot json\n</tool_call>", "<tool_call>\n{\"name\": \"f\"}\n</tool_call>",
        "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1"}) {
    ToolReply r = parse_tool_reply(text, false);
    EXPECT_TRUE(r.calls.empty()) << text;
    EXPECT_EQ(r.content, text);
  }
}

TEST(ToolCallParser, MaxCallsDropsLaterOnes) {
  ToolReply r = parse_tool_reply(
      "<tool_call>{\"name\": \"a\", \"arguments\": {}}</tool_call><tool_call>{\"name\": \"b\", "
      "\"arguments\": {}}</tool_call>",
      false, 1);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].name, "a");
}

// What the openai client does with the chunks: content appended, tool_calls merged by index
// (id, type and name from the first chunk of a call, arguments appended).
struct Assembled {
  std::string content;
  std::vector<json> calls;
};
Assembled assemble(const std::vector<ToolCallStream::Delta>& deltas) {
  Assembled a;
  for (const auto& d : deltas) {
    a.content += d.content;
    for (const json& c : d.tool_calls) {
      const size_t i = c.at("index");
      if (i == a.calls.size()) {
        EXPECT_TRUE(c.contains("id") && c.contains("type")) << c;
        EXPECT_EQ(c["function"]["arguments"], "") << "a call's first chunk has empty arguments";
        a.calls.push_back(c);
        continue;
      }
      EXPECT_LT(i, a.calls.size());
      EXPECT_FALSE(c.contains("id"));
      a.calls[i]["function"]["arguments"] = a.calls[i]["function"]["arguments"].get<std::string>() +
                                            c["function"]["arguments"].get<std::string>();
    }
  }
  return a;
}

TEST(ToolCallParser, EveryStreamSplitAssemblesToTheWholeReply) {
  const std::string replies[] = {
      "Checking the weather.\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
      "{\"city\": \"S\u00e3o Paulo\", \"q\": \"</tool\", \"o\": {\"x\": {}}}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>",
      "no call at all, a < b and <tool but not a tag\n",
      "<tool_call>{\"arguments\": {\"a\": 1}, \"name\": \"f\"}</tool_call>",
  };
  for (const std::string& text : replies) {
    const ToolReply whole = parse_tool_reply(text, false);
    for (size_t step = 1; step <= 7; ++step) {
      ToolCallStream stream(false);
      std::vector<ToolCallStream::Delta> deltas;
      for (size_t i = 0; i < text.size(); i += step)
        deltas.push_back(stream.feed(text.substr(i, step)));
      deltas.push_back(stream.finish());
      const Assembled a = assemble(deltas);
      EXPECT_EQ(a.content, whole.content.value_or("")) << step << ": " << text;
      ASSERT_EQ(a.calls.size(), whole.calls.size()) << step << ": " << text;
      for (size_t i = 0; i < a.calls.size(); ++i) {
        EXPECT_EQ(a.calls[i]["function"]["name"], whole.calls[i].name);
        EXPECT_EQ(a.calls[i]["function"]["arguments"], whole.calls[i].arguments) << step;
        // The arguments are JSON as they stand.
        EXPECT_FALSE(json::parse(whole.calls[i].arguments, nullptr, false).is_discarded());
      }
      EXPECT_EQ(a.content.find("tool_call"), std::string::npos) << a.content;
    }
  }
}

// Qwen2.5-Coder writes its calls in a ```json fence: read as calls in kHermesFenced, streamed
// or whole, beside <tool_call> ones; in plain kHermes a fence stays content.
TEST(ToolCallParser, FencedCallsInTheCoderFormat) {
  const std::string text =
      "Sure.\n```json\n{\n  \"name\": \"get_weather\",\n  \"arguments\": {\"city\": "
      "\"Oslo\", \"q\": \"``\"}\n}\n```\n<tool_call>\n{\"name\": \"now\", \"arguments\": "
      "{}}\n</tool_call>";
  const ToolReply whole = parse_tool_reply(text, false, SIZE_MAX, ToolCallFormat::kHermesFenced);
  ASSERT_EQ(whole.calls.size(), 2u);
  EXPECT_EQ(whole.content, "Sure.");
  EXPECT_EQ(whole.calls[0].name, "get_weather");
  EXPECT_EQ(json::parse(whole.calls[0].arguments), json::parse(R"({"city": "Oslo", "q": "``"})"));
  EXPECT_EQ(whole.calls[1].name, "now");
  for (size_t step = 1; step <= 5; ++step) {
    ToolCallStream stream(false, SIZE_MAX, ToolCallFormat::kHermesFenced);
    std::vector<ToolCallStream::Delta> deltas;
    for (size_t i = 0; i < text.size(); i += step)
      deltas.push_back(stream.feed(text.substr(i, step)));
    deltas.push_back(stream.finish());
    const Assembled a = assemble(deltas);
    EXPECT_EQ(a.content, "Sure.") << step;
    ASSERT_EQ(a.calls.size(), 2u) << step;
    EXPECT_EQ(a.calls[0]["function"]["arguments"], whole.calls[0].arguments) << step;
  }
  // Other fences are text; in Qwen 2.5's format a json fence is too.
  const std::string code = "Here:\n```python\nprint(1)\n```";
  EXPECT_EQ(parse_tool_reply(code, false, SIZE_MAX, ToolCallFormat::kHermesFenced).content, code);
  const ToolReply plain = parse_tool_reply(text.substr(0, text.find("<tool_call>")), false);
  EXPECT_TRUE(plain.calls.empty());
}

// Found by fuzzing: with max_calls 1, the kept call's closing braces arriving with its
// </tool_call> were never sent (the call counted as past the limit once it had started).
TEST(ToolCallParser, KeptCallIsCompleteWhenLaterOnesAreDropped) {
  const std::string text =
      "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1]}}\n</tool_call>\n"
      "<tool_call>{\"name\": \"g\", \"arguments\": {}}</tool_call>";
  for (size_t cut = 1; cut < text.size(); ++cut) {
    ToolCallStream stream(false, 1);
    std::string args;
    for (const auto& d :
         {stream.feed(text.substr(0, cut)), stream.feed(text.substr(cut)), stream.finish()}) {
      for (const json& c : d.tool_calls) {
        EXPECT_EQ(c.at("index"), 0) << cut;
        args += c["function"]["arguments"].get<std::string>();
      }
    }
    EXPECT_EQ(args, R"({"a": [1]})") << cut;
    ASSERT_EQ(stream.calls().size(), 1u);
  }
}

TEST(ToolCallParser, ArgumentsStreamBeforeTheCallCloses) {
  ToolCallStream stream(true);
  auto d = stream.feed(R"({"name": "f", "arguments": {"city": "Par)");
  ASSERT_EQ(d.tool_calls.size(), 2u);  // the header, then the arguments so far
  EXPECT_EQ(d.tool_calls[0]["function"]["name"], "f");
  EXPECT_EQ(d.tool_calls[1]["function"]["arguments"], R"({"city": "Par)");
  d = stream.feed(R"(is"}})");
  EXPECT_EQ(d.tool_calls[0]["function"]["arguments"], R"(is")");  // braces held back
  d = stream.finish();
  EXPECT_EQ(d.tool_calls[0]["function"]["arguments"], "}");
  EXPECT_EQ(stream.calls()[0].arguments, R"({"city": "Paris"})");
}

TEST(ToolCallParser, LlamaJsonReplyIsOneCall) {
  const std::string text = R"(  {"name": "get_weather", "parameters": {"city": "Paris", "n": 2}})";
  const ToolReply whole = parse_tool_reply(text, false, SIZE_MAX, ToolCallFormat::kLlamaJson);
  EXPECT_FALSE(whole.content.has_value());
  ASSERT_EQ(whole.calls.size(), 1u);
  EXPECT_EQ(whole.calls[0].name, "get_weather");
  EXPECT_EQ(whole.calls[0].arguments, R"({"city":"Paris","n":2})");
  for (size_t cut = 0; cut <= text.size(); ++cut) {  // streamed: nothing until the end
    ToolCallStream stream(false, SIZE_MAX, ToolCallFormat::kLlamaJson);
    const auto a = stream.feed(text.substr(0, cut));
    const auto b = stream.feed(text.substr(cut));
    EXPECT_TRUE(a.content.empty() && a.tool_calls.empty() && b.content.empty()) << cut;
    const auto d = stream.finish();
    ASSERT_EQ(d.tool_calls.size(), 2u);
    EXPECT_EQ(d.tool_calls[0]["function"]["name"], "get_weather");
    EXPECT_EQ(d.tool_calls[1]["function"]["arguments"], whole.calls[0].arguments);
  }
}

TEST(ToolCallParser, LlamaTextOrOtherJsonIsContent) {
  for (const std::string text : {"Hello {\"name\": 1}", "{\"name\": \"f\"}", "{not json", "  "}) {
    const ToolReply r = parse_tool_reply(text, false, SIZE_MAX, ToolCallFormat::kLlamaJson);
    EXPECT_TRUE(r.calls.empty()) << text;
    EXPECT_EQ(r.content, text);
    ToolCallStream stream(false, SIZE_MAX, ToolCallFormat::kLlamaJson);
    std::string content = stream.feed(text.substr(0, 3)).content;
    content += stream.feed(text.substr(std::min<size_t>(3, text.size()))).content;
    content += stream.finish().content;
    EXPECT_EQ(content, text);
    EXPECT_TRUE(stream.calls().empty());
  }
}

}  // namespace
}  // namespace kiln::server
