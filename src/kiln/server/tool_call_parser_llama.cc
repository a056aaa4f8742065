// LlamaJsonCallParser: Llama 3.1's calls have no markers, so the first non-space byte of the
// reply decides; a reply starting with "{" waits for its end (tool_call_parsers.h).
#include "kiln/server/tool_call_parsers.h"
#include "kiln/server/tool_call_text.h"

namespace kiln::server {

LlamaJsonCallParser::LlamaJsonCallParser(const ToolCallFormatRow& format, bool /*opened*/,
                                         size_t max_calls)
    : ToolCallParser(max_calls), format_(format) {}

void LlamaJsonCallParser::feed(std::string_view text, ToolCallDelta& out) {
  pending_ += text;
  decide(out, false);
}

void LlamaJsonCallParser::finish(ToolCallDelta& out) { decide(out, true); }

void LlamaJsonCallParser::decide(ToolCallDelta& out, bool at_end) {
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
  const std::string key(format_.arguments_key);
  const auto parsed = tool_text::parse_model_json(pending_);
  if (!tool_text::is_call_object(parsed, key)) {  // nothing went out yet: the reply is content
    mark_invalid();
    out.content += pending_;
  } else {
    add_whole_call(out, parsed["name"].get<std::string>(), parsed[key].dump());
  }
  pending_.clear();
}

}  // namespace kiln::server
