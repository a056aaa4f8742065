// HermesCallParser: Qwen's <tool_call>\n{...}\n</tool_call> (and Qwen2.5-Coder's ```json fence),
// each call's arguments streaming while the model writes them (tool_call_parsers.h).
#include "kiln/server/tool_call_parsers.h"
#include "kiln/server/tool_call_text.h"

namespace kiln::server {
namespace {

using tool_text::is_space;
using tool_text::partial_tag_at_end;

// The arguments' text once the call is complete: `region` minus the object's closing brace and
// the whitespace around it.
std::string_view final_arguments(std::string_view region) {
  while (!region.empty() && is_space(region.back())) region.remove_suffix(1);
  if (!region.empty() && region.back() == '}') region.remove_suffix(1);
  while (!region.empty() && is_space(region.back())) region.remove_suffix(1);
  return region;
}

// The part of an open call's arguments that is surely theirs: up to the last byte that is
// neither whitespace nor '}' (those may be the closing of the call object).
size_t sure_arguments(std::string_view region) {
  size_t n = region.size();
  while (n > 0 && (is_space(region[n - 1]) || region[n - 1] == '}')) --n;
  return n;
}

}  // namespace

HermesCallParser::HermesCallParser(const ToolCallFormatRow& format, bool opened, size_t max_calls)
    : MarkedCallParser(format, max_calls) {
  if (opened) start_opened();
}

void HermesCallParser::open_call(size_t which) {
  call_tag_ = which;
  begin_object();
}

// pending() holds the open call's inner text.
bool HermesCallParser::scan_call(ToolCallDelta& out, bool at_end) {
  std::string& pending = this->pending();
  const std::string_view close_tag = format().tags[call_tag_].close;
  const size_t close = pending.find(close_tag);
  const bool closed = close != std::string::npos || at_end;
  const std::string_view inner =
      std::string_view(pending).substr(0, close == std::string::npos ? pending.size() : close);
  const bool counted = this->counted();  // this call is kept
  try_send_header(out, inner, format().arguments_key);
  if (header_sent() && counted && !closed) {
    // Not the start of a closing tag either.
    std::string_view region = inner.substr(args_begin());
    region.remove_suffix(partial_tag_at_end(region, close_tag));
    send_arguments(out, region.substr(0, sure_arguments(region)));
  }
  if (!closed) return false;
  if (counted && !close_call(out, inner)) mark_invalid();
  count_call();
  pending.erase(0, close == std::string::npos ? pending.size() : close + close_tag.size());
  return true;
}

// Checks the complete call and sends what is left of it. False: it is not a valid call.
bool HermesCallParser::close_call(ToolCallDelta& out, std::string_view inner) {
  const std::string key(format().arguments_key);
  const auto parsed = tool_text::parse_model_json(inner);
  const bool valid = tool_text::is_call_object(parsed, key);
  if (header_sent()) {
    const std::string_view args = final_arguments(inner.substr(args_begin()));
    if (!args.starts_with(last_call().arguments)) return false;
    send_arguments(out, args);
    return valid && !tool_text::parse_model_json(args).is_discarded();
  }
  if (!valid) return false;
  // Not written name first: the call goes out whole.
  add_whole_call(out, parsed["name"].get<std::string>(), parsed[key].dump());
  return true;
}

}  // namespace kiln::server
