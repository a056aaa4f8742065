#include "kiln/server/tool_call_stream.h"

namespace kiln::server {

ToolReply parse_tool_reply(std::string_view text, bool opened, size_t max_calls,
                           ToolCallFormat format) {
  ToolCallStream stream(opened, max_calls, format);
  std::string content = stream.feed(text).content;
  content += stream.finish().content;
  ToolReply out;
  if (stream.calls().empty() || stream.any_invalid()) {  // no valid call: the reply as text
    out.content = std::string(text);
    return out;
  }
  if (!content.empty()) out.content = content;
  out.calls = stream.calls();
  return out;
}

nlohmann::json tool_calls_json(const std::vector<ToolCallOut>& calls) {
  nlohmann::json out = nlohmann::json::array();
  for (const ToolCallOut& c : calls) {
    out.push_back({{"id", c.id},
                   {"type", "function"},
                   {"function", {{"name", c.name}, {"arguments", c.arguments}}}});
  }
  return out;
}

}  // namespace kiln::server
