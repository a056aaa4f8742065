// MistralCallParser: Mistral's call array, "[TOOL_CALLS][{...}, {...}]" (the marker is found by
// MarkedCallParser): the array's structure byte by byte, each call object scanned for its end
// (strings and nesting tracked) so that its arguments stream while it is written.
#include <algorithm>

#include "kiln/server/tool_call_parsers.h"
#include "kiln/server/tool_call_text.h"

namespace kiln::server {

using tool_text::is_space;

MistralCallParser::MistralCallParser(const ToolCallFormatRow& format, bool opened, size_t max_calls)
    : MarkedCallParser(format, max_calls) {
  if (opened) start_opened();
}

void MistralCallParser::open_call(size_t /*which*/) {
  step_ = Step::kOpen;
  array_empty_ = true;
}

// Not an array of calls (or cut off): the reply is invalid; what follows is dropped unless it
// opens another array.
void MistralCallParser::fail_array() {
  mark_invalid();
  step_ = Step::kDone;
}

bool MistralCallParser::scan_call(ToolCallDelta& out, bool at_end) {
  std::string& pending = this->pending();
  while (step_ != Step::kDone) {
    if (step_ == Step::kCall) {
      if (!scan_array_call(out, at_end)) return step_ == Step::kDone;  // the call is still open
      continue;
    }
    size_t i = 0;
    while (i < pending.size() && is_space(pending[i])) ++i;
    pending.erase(0, i);
    if (pending.empty()) {
      if (at_end) fail_array();
      return step_ == Step::kDone;
    }
    const char c = pending[0];
    if (step_ == Step::kOpen) {
      if (c != '[') {
        fail_array();
        break;
      }
      pending.erase(0, 1);
      step_ = Step::kItem;
    } else if (step_ == Step::kItem && c == '{') {
      step_ = Step::kCall;
      scanned_ = 0;
      depth_ = 0;
      in_string_ = escaped_ = false;
      args_end_ = std::string::npos;
      begin_object();
    } else if ((step_ == Step::kItem && c == ']' && array_empty_) ||
               (step_ == Step::kAfter && c == ']')) {
      pending.erase(0, 1);
      step_ = Step::kDone;  // text after the array is not content
    } else if (step_ == Step::kAfter && c == ',') {
      pending.erase(0, 1);
      step_ = Step::kItem;
    } else {
      fail_array();
    }
  }
  return true;
}

// pending() starts with the open call object. True once it is complete (and consumed).
bool MistralCallParser::scan_array_call(ToolCallDelta& out, bool at_end) {
  std::string& pending = this->pending();
  const bool counted = this->counted();  // this call is kept
  try_send_header(out, pending, format().arguments_key);
  size_t object_end = std::string::npos;
  for (; scanned_ < pending.size(); ++scanned_) {
    const char c = pending[scanned_];
    if (in_string_) {
      if (escaped_) {
        escaped_ = false;
      } else if (c == '\\') {
        escaped_ = true;
      } else if (c == '"') {
        in_string_ = false;
      }
      continue;
    }
    // A ',' or '}' directly inside the call object, after the arguments began, ends them.
    if (header_sent() && args_end_ == std::string::npos && depth_ == 1 &&
        scanned_ >= args_begin() && (c == ',' || c == '}')) {
      args_end_ = scanned_;
    }
    if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      ++depth_;
    } else if ((c == '}' || c == ']') && --depth_ == 0) {
      object_end = ++scanned_;
      break;
    }
  }
  if (header_sent() && counted) {
    // The arguments so far, less trailing whitespace (it may separate them from a ',').
    const size_t stop = std::min(args_end_, scanned_);
    std::string_view args = std::string_view(pending).substr(args_begin(), stop - args_begin());
    while (!args.empty() && is_space(args.back())) args.remove_suffix(1);
    send_arguments(out, args);
  }
  if (object_end == std::string::npos) {
    if (at_end) {  // cut off inside a call
      if (counted) mark_invalid();
      fail_array();
    }
    return false;
  }
  if (counted && !close_array_call(out, std::string_view(pending).substr(0, object_end))) {
    mark_invalid();
  }
  count_call();
  array_empty_ = false;
  pending.erase(0, object_end);
  step_ = Step::kAfter;
  return true;
}

// Checks the complete call object. False: it is not a valid call.
bool MistralCallParser::close_array_call(ToolCallDelta& out, std::string_view object) {
  const std::string key(format().arguments_key);
  const auto parsed = tool_text::parse_model_json(object);
  const bool valid = !parsed.is_discarded() && parsed.is_object() && parsed.contains("name") &&
                     parsed["name"].is_string() && parsed.contains(key);
  if (!valid) return false;
  for (const auto& [member, value] : parsed.items()) {
    // Mistral's templates write the call's id after its arguments; a model may copy that.
    if (member != "name" && member != key && !(member == "id" && value.is_string())) return false;
  }
  if (header_sent()) {
    // Its arguments went out as they were written: they must be the value the object holds
    // (not, say, the first of two "arguments" members).
    const auto sent = tool_text::parse_model_json(last_call().arguments);
    return !sent.is_discarded() && sent == parsed[key];
  }
  // Not written name first: the call goes out whole.
  add_whole_call(out, parsed["name"].get<std::string>(), parsed[key].dump());
  return true;
}

}  // namespace kiln::server
