// Tool-call parsing of a model reply, for every format of the table (model/tool_call_format.h):
// the text, cut into pieces where the input says, streamed through ToolCallStream must assemble
// to what parse_tool_reply gives for the whole text (when every call is valid), and no streamed
// content may hold one of the format's opening markers (<tool_call>, ```json, [TOOL_CALLS]).
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "kiln/model/tool_call_format.h"
#include "kiln/server/tool_call_stream.h"

namespace {

using namespace kiln::server;

void check_format(const kiln::model::ToolCallFormatRow& row, bool opened, size_t max_calls,
                  const std::vector<size_t>& cuts, const std::string& text) {
  ToolCallStream stream(opened, max_calls, row.format);
  std::string content;
  std::vector<std::string> arguments;
  auto take = [&](const ToolCallStream::Delta& d) {
    content += d.content;
    for (const auto& c : d.tool_calls) {
      const size_t i = c.at("index");
      if (i == arguments.size()) arguments.emplace_back();
      if (i >= arguments.size()) std::abort();  // indexes come in order
      arguments[i] += c["function"]["arguments"].get<std::string>();
    }
  };
  size_t at = 0;
  for (size_t k = 0; at < text.size(); ++k) {
    const size_t n = cuts.empty() ? text.size() : cuts[k % cuts.size()];
    take(stream.feed(std::string_view(text).substr(at, n)));
    at += n;
  }
  take(stream.finish());
  for (size_t t = 0; t < row.tag_count; ++t) {
    if (content.find(row.tags[t].open) != std::string::npos) std::abort();
  }
  if (stream.any_invalid()) return;
  const ToolReply whole = parse_tool_reply(text, opened, max_calls, row.format);
  if (whole.calls.size() != arguments.size()) std::abort();
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (whole.calls[i].arguments != arguments[i]) std::abort();
  }
  if (!whole.calls.empty() && whole.content.value_or("") != content) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const bool opened = in.ConsumeBool();
  const size_t max_calls = in.ConsumeIntegralInRange<size_t>(1, 4);
  std::vector<size_t> cuts(in.ConsumeIntegralInRange<size_t>(0, 16));
  for (size_t& c : cuts) c = in.ConsumeIntegralInRange<size_t>(1, 64);
  const std::string text = in.ConsumeRemainingBytesAsString();
  for (const auto& row : kiln::model::kToolCallFormats) {
    check_format(row, opened, max_calls, cuts, text);
  }
  return 0;
}
