#include "kiln/server/tool_call_parser.h"

#include <algorithm>

#include "kiln/server/tool_call_text.h"

namespace kiln::server {
namespace {

constexpr ToolCallTags kHermesTags = {"<tool_call>", "</tool_call>"};
constexpr ToolCallTags kFenceTags = {"```json\n", "```"};

using tool_text::call_id;
using tool_text::is_space;
using tool_text::kMore;
using tool_text::match_header;
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

ToolCallStream::ToolCallStream(bool opened, size_t max_calls, ToolCallFormat format)
    : mode_(format == ToolCallFormat::kLlamaJson ? Mode::kUndecided
            : opened                             ? Mode::kCall
                                                 : Mode::kText),
      format_(format),
      max_calls_(max_calls) {
  if (opened && format == ToolCallFormat::kMistral) open_array();
}

// The opening and closing texts of the t-th call syntax of this format (Mistral's array has no
// closing text: scan_array finds its end).
ToolCallTags ToolCallStream::tag(size_t t) const {
  if (format_ == ToolCallFormat::kMistral) return {kMistralMarker, ""};
  return t == 0 ? kHermesTags : kFenceTags;
}

// The earliest opening tag in pending_ (npos: none), and which one it is.
size_t ToolCallStream::find_open(size_t& which) const {
  size_t best = std::string::npos;
  for (size_t t = 0; t < tag_count(); ++t) {
    const size_t at = pending_.find(tag(t).open);
    if (at < best) best = at, which = t;
  }
  return best;
}

// Bytes at the end of pending_ that could begin an opening tag.
size_t ToolCallStream::partial_open_at_end() const {
  size_t n = 0;
  for (size_t t = 0; t < tag_count(); ++t) {
    n = std::max(n, partial_tag_at_end(pending_, tag(t).open));
  }
  return n;
}

size_t ToolCallStream::tag_count() const {
  return format_ == ToolCallFormat::kHermesFenced ? 2 : 1;
}

ToolCallStream::Delta ToolCallStream::feed(std::string_view text) {
  Delta out;
  pending_ += text;
  if (format_ == ToolCallFormat::kLlamaJson) {
    feed_llama(out, false);
  } else {
    scan(out, false);
  }
  return out;
}

// Llama 3.1: the first non-space byte decides; a reply starting with "{" waits for its end.
void ToolCallStream::feed_llama(Delta& out, bool at_end) {
  if (mode_ == Mode::kUndecided) {
    const size_t start = pending_.find_first_not_of(" \t\r\n");
    if (start == std::string::npos && !at_end) return;
    mode_ = start != std::string::npos && pending_[start] == '{' ? Mode::kJsonReply : Mode::kText;
  }
  if (mode_ == Mode::kText) {
    out.content += pending_;
    pending_.clear();
    return;
  }
  if (!at_end) return;
  const auto parsed = tool_text::parse_model_json(pending_);
  const bool valid = !parsed.is_discarded() && parsed.is_object() && parsed.size() == 2 &&
                     parsed.contains("name") && parsed["name"].is_string() &&
                     parsed.contains("parameters");
  if (!valid) {  // nothing went out yet: the reply is content after all
    invalid_ = true;
    out.content += pending_;
  } else {
    add_whole_call(out, parsed["name"].get<std::string>(), parsed["parameters"].dump());
  }
  pending_.clear();
}

// A call sent at once: its header chunk, then all of its arguments.
void ToolCallStream::add_whole_call(Delta& out, std::string name, std::string arguments) {
  calls_.push_back({call_id(), std::move(name), std::move(arguments)});
  out.tool_calls.push_back({{"index", calls_.size() - 1},
                            {"id", calls_.back().id},
                            {"type", "function"},
                            {"function", {{"name", calls_.back().name}, {"arguments", ""}}}});
  out.tool_calls.push_back(
      {{"index", calls_.size() - 1}, {"function", {{"arguments", calls_.back().arguments}}}});
}

ToolCallStream::Delta ToolCallStream::finish() {
  Delta out;
  if (format_ == ToolCallFormat::kLlamaJson) {
    feed_llama(out, true);
    return out;
  }
  scan(out, true);
  if (mode_ == Mode::kText) {
    out.content += held_space_ + pending_;
    held_space_.clear();
    pending_.clear();
  }
  return out;
}

void ToolCallStream::scan(Delta& out, bool at_end) {
  for (;;) {
    if (mode_ == Mode::kCall) {
      const size_t calls_before = seen_calls_;
      scan_call(out, at_end);
      if (seen_calls_ == calls_before) return;  // the call is still open
      continue;
    }
    if (mode_ == Mode::kArray) {
      scan_array(out, at_end);
      if (mode_ == Mode::kArray) return;  // the array is still open
      continue;
    }
    size_t which = 0;
    const size_t open = find_open(which);
    if (open == std::string::npos) {
      if (mode_ == Mode::kBetween) {  // text between calls is not content; keep a partial tag
        pending_.erase(0, pending_.size() - partial_open_at_end());
        return;
      }
      const size_t keep = at_end ? 0 : partial_open_at_end();
      std::string_view sure = std::string_view(pending_).substr(0, pending_.size() - keep);
      size_t text_end = sure.size();
      while (text_end > 0 && is_space(sure[text_end - 1])) --text_end;
      if (text_end > 0) {
        out.content += held_space_;
        out.content.append(sure.substr(0, text_end));
        held_space_.clear();
      }
      held_space_.append(sure.substr(text_end));
      pending_.erase(0, sure.size());
      return;
    }
    if (mode_ == Mode::kText) {
      std::string_view before = std::string_view(pending_).substr(0, open);
      while (!before.empty() && is_space(before.back())) before.remove_suffix(1);
      if (!before.empty()) out.content += held_space_ + std::string(before);
      held_space_.clear();
    }
    pending_.erase(0, open + tag(which).open.size());
    call_tag_ = which;
    if (format_ == ToolCallFormat::kMistral) {
      open_array();
      continue;
    }
    mode_ = Mode::kCall;
    header_sent_ = false;
    args_sent_ = 0;
  }
}

// pending_ holds the open call's inner text.
void ToolCallStream::scan_call(Delta& out, bool at_end) {
  const std::string_view close_tag = tag(call_tag_).close;
  const size_t close = pending_.find(close_tag);
  const bool closed = close != std::string::npos || at_end;
  const std::string_view inner =
      std::string_view(pending_).substr(0, close == std::string::npos ? pending_.size() : close);
  const bool counted = seen_calls_ < max_calls_;  // this call (the seen_calls_-th) is kept
  if (!header_sent_ && counted) {
    std::string name;
    const size_t end = match_header(inner, name);
    if (end != kMore && end != 0) {
      header_sent_ = true;
      args_begin_ = end;
      calls_.push_back({call_id(), name, ""});
      out.tool_calls.push_back({{"index", calls_.size() - 1},
                                {"id", calls_.back().id},
                                {"type", "function"},
                                {"function", {{"name", name}, {"arguments", ""}}}});
    }
  }
  if (header_sent_ && counted && !closed) {
    // Not the start of a closing tag either.
    std::string_view region = inner.substr(args_begin_);
    region.remove_suffix(partial_tag_at_end(region, close_tag));
    send_arguments(out, region.substr(0, sure_arguments(region)));
  }
  if (!closed) return;
  if (counted && !close_call(out, inner)) invalid_ = true;
  ++seen_calls_;
  pending_.erase(0, close == std::string::npos ? pending_.size() : close + close_tag.size());
  mode_ = Mode::kBetween;
}

void ToolCallStream::send_arguments(Delta& out, std::string_view args) {
  if (args.size() <= args_sent_) return;
  calls_.back().arguments.append(args.substr(args_sent_));
  out.tool_calls.push_back({{"index", calls_.size() - 1},
                            {"function", {{"arguments", std::string(args.substr(args_sent_))}}}});
  args_sent_ = args.size();
}

// Checks the complete call and sends what is left of it. False: it is not a valid call.
bool ToolCallStream::close_call(Delta& out, std::string_view inner) {
  const auto parsed = tool_text::parse_model_json(inner);
  const bool valid = !parsed.is_discarded() && parsed.is_object() && parsed.size() == 2 &&
                     parsed.contains("name") && parsed["name"].is_string() &&
                     parsed.contains("arguments");
  if (header_sent_) {
    const std::string_view args = final_arguments(inner.substr(args_begin_));
    if (!args.starts_with(calls_.back().arguments)) return false;
    send_arguments(out, args);
    return valid && !tool_text::parse_model_json(args).is_discarded();
  }
  if (!valid) return false;
  // Not written name first: the call goes out whole.
  add_whole_call(out, parsed["name"].get<std::string>(), parsed["arguments"].dump());
  return true;
}

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
