// The tool-call format table is complete: every ToolCallFormat has exactly one row
// (model/tool_call_format.h) and one parser (server/tool_call_parsers.h), the rows agree with
// themselves, and each format's parser reads a call written with its own row's markers and key,
// whole and streamed, unforced and forced.
#include "kiln/model/tool_call_format.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>

#include "kiln/server/tool_call_parsers.h"
#include "kiln/server/tool_call_stream.h"

namespace kiln::server {
namespace {

using model::kToolCallFormatCount;
using model::kToolCallFormats;
using model::tool_call_format_row;

std::vector<ToolCallFormat> all_formats() {
  std::vector<ToolCallFormat> out;
  for (size_t f = 0; f < kToolCallFormatCount; ++f) out.push_back(static_cast<ToolCallFormat>(f));
  return out;
}

TEST(ToolCallFormatTable, EveryFormatHasExactlyOneRowAndOneParser) {
  std::set<std::string_view> names;
  for (ToolCallFormat format : all_formats()) {
    size_t rows = 0, parsers = 0;
    for (const auto& row : kToolCallFormats) rows += row.format == format ? 1 : 0;
    for (const auto& entry : kToolCallParsers) {
      parsers += entry.format == format && entry.make != nullptr ? 1 : 0;
    }
    const std::string_view name = tool_call_format_row(format).name;
    EXPECT_EQ(rows, 1u) << name;
    EXPECT_EQ(parsers, 1u) << name;
    EXPECT_EQ(tool_call_format_row(format).format, format) << name;
    EXPECT_NE(make_tool_call_parser(format, false), nullptr) << name;
    EXPECT_FALSE(name.empty());
    EXPECT_TRUE(names.insert(name).second) << "two formats named " << name;
  }
  EXPECT_EQ(kToolCallFormats.size(), kToolCallFormatCount);
  EXPECT_EQ(kToolCallParsers.size(), kToolCallFormatCount);
}

TEST(ToolCallFormatTable, RowsAgreeWithThemselves) {
  for (const auto& row : kToolCallFormats) {
    SCOPED_TRACE(std::string(row.name));
    ASSERT_LE(row.tag_count, row.tags.size());
    for (size_t t = 0; t < row.tag_count; ++t) {
      EXPECT_FALSE(row.tags[t].open.empty());
      // A call array ends with the array; every other call with its closing text.
      EXPECT_EQ(row.tags[t].close.empty(), row.call_array);
    }
    for (size_t t = row.tag_count; t < row.tags.size(); ++t) EXPECT_TRUE(row.tags[t].open.empty());
    // A forced call opens the way the model opens one itself.
    if (!row.forced_prefill.empty()) {
      ASSERT_GT(row.tag_count, 0u);
      EXPECT_TRUE(row.forced_prefill.starts_with(row.call_open()));
    }
    if (row.tag_count == 0) {  // nothing to find, keep visible, or stop at
      EXPECT_FALSE(row.markers_are_special);
      EXPECT_TRUE(row.single_call_stop.empty());
    }
    if (!row.single_call_stop.empty()) {
      EXPECT_EQ(row.single_call_stop, row.call_close());
    }
    if (row.forced_leading_space) {
      EXPECT_FALSE(row.forced_prefill.empty());
    }
    EXPECT_FALSE(row.arguments_key.empty());
  }
}

constexpr std::string_view kArguments = R"({"city": "Paris", "days": [1, 2]})";

// One call to get_weather written in `row`'s syntax `tag` (the object alone without markers).
std::string written_call(const model::ToolCallFormatRow& row, size_t tag) {
  const std::string object =
      fmt::format(R"({{"name": "get_weather", "{}": {}}})", row.arguments_key, kArguments);
  if (row.tag_count == 0) return object;
  const model::ToolCallTags& tags = row.tags[tag];
  if (row.call_array) return fmt::format("{}[{}]", tags.open, object);
  return fmt::format("{}\n{}\n{}", tags.open, object, tags.close);
}

void expect_the_call(const ToolReply& reply, const std::string& text) {
  ASSERT_EQ(reply.calls.size(), 1u) << text;
  EXPECT_EQ(reply.calls[0].name, "get_weather");
  // The model's own text where it streams; re-serialized where the call is read whole (Llama).
  EXPECT_EQ(nlohmann::json::parse(reply.calls[0].arguments), nlohmann::json::parse(kArguments));
}

TEST(ToolCallFormatTable, EachParserReadsACallWrittenWithItsRow) {
  for (const auto& row : kToolCallFormats) {
    SCOPED_TRACE(std::string(row.name));
    if (row.format == ToolCallFormat::kNone) {  // no format: a call's text is content
      const std::string text = R"({"name": "f", "arguments": {}} <tool_call>)";
      const ToolReply reply = parse_tool_reply(text, false, SIZE_MAX, row.format);
      EXPECT_TRUE(reply.calls.empty());
      EXPECT_EQ(reply.content, text);
      continue;
    }
    for (size_t tag = 0; tag < std::max<size_t>(row.tag_count, 1); ++tag) {
      const std::string call = written_call(row, tag);
      // Text before a call is content where markers find the call; Llama's reply is the call.
      const std::string before = row.tag_count > 0 ? "Let me look.\n" : "";
      const std::string text = before + call;
      const ToolReply whole = parse_tool_reply(text, false, SIZE_MAX, row.format);
      expect_the_call(whole, text);
      if (!before.empty()) {
        EXPECT_EQ(whole.content, "Let me look.");
      }

      // Streamed a byte at a time: the same call, its arguments as chunks.
      ToolCallStream stream(false, SIZE_MAX, row.format);
      std::string content, arguments;
      auto take = [&](const ToolCallDelta& d) {
        content += d.content;
        for (const auto& c : d.tool_calls) arguments += c["function"]["arguments"];
      };
      for (char c : text) take(stream.feed(std::string_view(&c, 1)));
      take(stream.finish());
      EXPECT_FALSE(stream.any_invalid());
      EXPECT_EQ(arguments, whole.calls.at(0).arguments);
      EXPECT_EQ(content, whole.content.value_or(""));

      // Forced: the prompt ended with the prefill, the reply is the rest of the call.
      if (!row.forced_prefill.empty() && tag == 0) {
        ASSERT_TRUE(call.starts_with(row.forced_prefill)) << call;
        const std::string rest = call.substr(row.forced_prefill.size());
        expect_the_call(parse_tool_reply(rest, true, SIZE_MAX, row.format), rest);
      }
    }
  }
}

}  // namespace
}  // namespace kiln::server
