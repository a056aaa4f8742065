// MarkedCallParser: the text around calls that markers open (tool_call_parsers.h); the call
// itself is the subclass's to read.
#include <algorithm>

#include "kiln/server/tool_call_parsers.h"
#include "kiln/server/tool_call_text.h"

namespace kiln::server {

using tool_text::is_space;
using tool_text::partial_tag_at_end;

MarkedCallParser::MarkedCallParser(const ToolCallFormatRow& format, size_t max_calls)
    : ToolCallParser(max_calls), format_(format) {}

void MarkedCallParser::start_opened() {
  mode_ = Mode::kCall;
  open_call(0);
}

// The earliest opening marker in pending_ (npos: none), and which one it is.
size_t MarkedCallParser::find_open(size_t& which) const {
  size_t best = std::string::npos;
  for (size_t t = 0; t < format_.tag_count; ++t) {
    const size_t at = pending_.find(format_.tags[t].open);
    if (at < best) best = at, which = t;
  }
  return best;
}

// Bytes at the end of pending_ that could begin an opening marker.
size_t MarkedCallParser::partial_open_at_end() const {
  size_t n = 0;
  for (size_t t = 0; t < format_.tag_count; ++t) {
    n = std::max(n, partial_tag_at_end(pending_, format_.tags[t].open));
  }
  return n;
}

void MarkedCallParser::feed(std::string_view text, ToolCallDelta& out) {
  pending_ += text;
  scan(out, false);
}

void MarkedCallParser::finish(ToolCallDelta& out) {
  scan(out, true);
  if (mode_ == Mode::kText) {
    out.content += held_space_ + pending_;
    held_space_.clear();
    pending_.clear();
  }
}

void MarkedCallParser::scan(ToolCallDelta& out, bool at_end) {
  for (;;) {
    if (mode_ == Mode::kCall) {
      if (!scan_call(out, at_end)) return;  // the call is still open
      mode_ = Mode::kBetween;
      continue;
    }
    size_t which = 0;
    const size_t open = find_open(which);
    if (open == std::string::npos) {
      give_text(out, at_end);
      return;
    }
    if (mode_ == Mode::kText) {
      std::string_view before = std::string_view(pending_).substr(0, open);
      while (!before.empty() && is_space(before.back())) before.remove_suffix(1);
      if (!before.empty()) out.content += held_space_ + std::string(before);
      held_space_.clear();
    }
    pending_.erase(0, open + format_.tags[which].open.size());
    mode_ = Mode::kCall;
    open_call(which);
  }
}

// pending_ opens no call: content up to a possible partial marker (its trailing whitespace held
// back, as a call may follow), or nothing between calls.
void MarkedCallParser::give_text(ToolCallDelta& out, bool at_end) {
  if (mode_ == Mode::kBetween) {  // text between calls is not content; keep a partial marker
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
}

}  // namespace kiln::server
