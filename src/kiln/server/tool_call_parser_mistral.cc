// ToolCallStream's reading of Mistral's call array, "[TOOL_CALLS][{...}, {...}]" (the marker is
// found by ToolCallStream::scan): the array's structure byte by byte, each call object scanned
// for its end (strings and nesting tracked) so that its arguments stream while it is written.
#include "kiln/server/tool_call_parser.h"
#include "kiln/server/tool_call_text.h"

namespace kiln::server {

using tool_text::is_space;
using tool_text::kMore;

void ToolCallStream::open_array() {
  mode_ = Mode::kArray;
  step_ = ArrayStep::kOpen;
  array_empty_ = true;
}

// Not an array of calls (or cut off): the reply is invalid; what follows is dropped unless it
// opens another array.
void ToolCallStream::fail_array() {
  invalid_ = true;
  mode_ = Mode::kBetween;
}

void ToolCallStream::scan_array(Delta& out, bool at_end) {
  while (mode_ == Mode::kArray) {
    if (step_ == ArrayStep::kCall) {
      if (!scan_array_call(out, at_end)) return;  // the call is still open
      continue;
    }
    size_t i = 0;
    while (i < pending_.size() && is_space(pending_[i])) ++i;
    pending_.erase(0, i);
    if (pending_.empty()) {
      if (at_end) fail_array();
      return;
    }
    const char c = pending_[0];
    if (step_ == ArrayStep::kOpen) {
      if (c != '[') return fail_array();
      pending_.erase(0, 1);
      step_ = ArrayStep::kItem;
    } else if (step_ == ArrayStep::kItem && c == '{') {
      step_ = ArrayStep::kCall;
      scanned_ = 0;
      depth_ = 0;
      in_string_ = escaped_ = false;
      args_end_ = std::string::npos;
      header_sent_ = false;
      args_sent_ = 0;
    } else if ((step_ == ArrayStep::kItem && c == ']' && array_empty_) ||
               (step_ == ArrayStep::kAfter && c == ']')) {
      pending_.erase(0, 1);
      mode_ = Mode::kBetween;  // text after the array is not content
    } else if (step_ == ArrayStep::kAfter && c == ',') {
      pending_.erase(0, 1);
      step_ = ArrayStep::kItem;
    } else {
      return fail_array();
    }
  }
}

// pending_ starts with the open call object. True once it is complete (and consumed).
bool ToolCallStream::scan_array_call(Delta& out, bool at_end) {
  const bool counted = seen_calls_ < max_calls_;  // this call (the seen_calls_-th) is kept
  if (!header_sent_ && counted) {
    std::string name;
    const size_t end = tool_text::match_header(pending_, name);
    if (end != kMore && end != 0) {
      header_sent_ = true;
      args_begin_ = end;
      calls_.push_back({tool_text::call_id(), name, ""});
      out.tool_calls.push_back({{"index", calls_.size() - 1},
                                {"id", calls_.back().id},
                                {"type", "function"},
                                {"function", {{"name", name}, {"arguments", ""}}}});
    }
  }
  size_t object_end = std::string::npos;
  for (; scanned_ < pending_.size(); ++scanned_) {
    const char c = pending_[scanned_];
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
    if (header_sent_ && args_end_ == std::string::npos && depth_ == 1 && scanned_ >= args_begin_ &&
        (c == ',' || c == '}')) {
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
  if (header_sent_ && counted) {
    // The arguments so far, less trailing whitespace (it may separate them from a ',').
    const size_t stop = std::min(args_end_, scanned_);
    std::string_view args = std::string_view(pending_).substr(args_begin_, stop - args_begin_);
    while (!args.empty() && is_space(args.back())) args.remove_suffix(1);
    send_arguments(out, args);
  }
  if (object_end == std::string::npos) {
    if (at_end) {  // cut off inside a call
      if (counted) invalid_ = true;
      fail_array();
    }
    return false;
  }
  if (counted && !close_array_call(out, std::string_view(pending_).substr(0, object_end))) {
    invalid_ = true;
  }
  ++seen_calls_;
  array_empty_ = false;
  pending_.erase(0, object_end);
  step_ = ArrayStep::kAfter;
  return true;
}

// Checks the complete call object. False: it is not a valid call.
bool ToolCallStream::close_array_call(Delta& out, std::string_view object) {
  const auto parsed = tool_text::parse_model_json(object);
  bool valid = !parsed.is_discarded() && parsed.is_object() && parsed.contains("name") &&
               parsed["name"].is_string() && parsed.contains("arguments");
  if (!valid) return false;
  for (const auto& [key, value] : parsed.items()) {
    // Mistral's templates write the call's id after its arguments; a model may copy that.
    if (key != "name" && key != "arguments" && !(key == "id" && value.is_string())) return false;
  }
  if (header_sent_) {
    // Its arguments went out as they were written: they must be the value the object holds
    // (not, say, the first of two "arguments" members).
    const auto sent = tool_text::parse_model_json(calls_.back().arguments);
    return !sent.is_discarded() && sent == parsed["arguments"];
  }
  // Not written name first: the call goes out whole.
  add_whole_call(out, parsed["name"].get<std::string>(), parsed["arguments"].dump());
  return true;
}

}  // namespace kiln::server
