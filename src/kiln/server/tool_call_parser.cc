// What every tool-call parser shares: the calls read so far and their delta chunks.
#include "kiln/server/tool_call_parser.h"

#include "kiln/server/tool_call_text.h"

namespace kiln::server {

void ToolCallParser::add_call(ToolCallDelta& out, std::string name, std::string arguments) {
  calls_.push_back({tool_text::call_id(), std::move(name), std::move(arguments)});
  out.tool_calls.push_back({{"index", calls_.size() - 1},
                            {"id", calls_.back().id},
                            {"type", "function"},
                            {"function", {{"name", calls_.back().name}, {"arguments", ""}}}});
}

void ToolCallParser::try_send_header(ToolCallDelta& out, std::string_view object,
                                     std::string_view args_key) {
  if (header_sent_ || !counted()) return;
  std::string name;
  const size_t end = tool_text::match_header(object, args_key, name);
  if (end == tool_text::kMore || end == 0) return;
  header_sent_ = true;
  args_begin_ = end;
  add_call(out, std::move(name), "");
}

void ToolCallParser::send_arguments(ToolCallDelta& out, std::string_view args) {
  if (args.size() <= args_sent_) return;
  calls_.back().arguments.append(args.substr(args_sent_));
  out.tool_calls.push_back({{"index", calls_.size() - 1},
                            {"function", {{"arguments", std::string(args.substr(args_sent_))}}}});
  args_sent_ = args.size();
}

void ToolCallParser::add_whole_call(ToolCallDelta& out, std::string name, std::string arguments) {
  add_call(out, std::move(name), std::move(arguments));
  out.tool_calls.push_back(
      {{"index", calls_.size() - 1}, {"function", {{"arguments", calls_.back().arguments}}}});
}

}  // namespace kiln::server
