// Tool-call parsing of a model reply: the text, cut into pieces where the input says, streamed
// through ToolCallStream must assemble to what parse_tool_reply gives for the whole text (when
// every call is valid), and no streamed content may hold an opening <tool_call> tag (Qwen's
// format) or [TOOL_CALLS] marker (Mistral's); the input also picks Llama 3.1's format.
#include <fuzzer/FuzzedDataProvider.h>

#include <array>
#include <cstdlib>
#include <string>

#include "kiln/server/tool_call_stream.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln::server;
  FuzzedDataProvider in(data, size);
  const bool opened = in.ConsumeBool();
  const ToolCallFormat format =
      std::array{ToolCallFormat::kHermes, ToolCallFormat::kLlamaJson,
                 ToolCallFormat::kMistral}[in.ConsumeIntegralInRange<size_t>(0, 2)];
  const size_t max_calls = in.ConsumeIntegralInRange<size_t>(1, 4);
  std::vector<size_t> cuts(in.ConsumeIntegralInRange<size_t>(0, 16));
  for (size_t& c : cuts) c = in.ConsumeIntegralInRange<size_t>(1, 64);
  const std::string text = in.ConsumeRemainingBytesAsString();

  ToolCallStream stream(opened, max_calls, format);
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
  if (format == ToolCallFormat::kHermes && content.find("<tool_call>") != std::string::npos) {
    std::abort();
  }
  if (format == ToolCallFormat::kMistral && content.find(kMistralMarker) != std::string::npos) {
    std::abort();
  }
  if (stream.any_invalid()) return 0;
  const ToolReply whole = parse_tool_reply(text, opened, max_calls, format);
  if (whole.calls.size() != arguments.size()) std::abort();
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (whole.calls[i].arguments != arguments[i]) std::abort();
  }
  if (!whole.calls.empty() && whole.content.value_or("") != content) std::abort();
  return 0;
}
