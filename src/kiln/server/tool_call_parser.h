// Reads tool calls out of a model's reply incrementally, so that a stream can send OpenAI's
// delta.tool_calls chunks as the text arrives and never sends a call's text as content. One
// parser class per tool-call format (tool_call_parsers.h), all behind this interface; the
// format's row (model/tool_call_format.h) gives each its markers and keys, and kToolCallParsers
// (tool_call_parsers.h) which class reads which format. ToolCallStream (tool_call_stream.h) is
// what the routes use.
//
// Arguments are the model's own text of the arguments value (so they can stream as they are
// generated) when the call is written name first, as the formats show; otherwise the value
// re-serialized once the call is complete. A call whose text is not a call object is invalid:
// the whole-reply form then gives the reply as content with no calls; a stream cannot take back
// what it sent, and drops it.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/model/tool_call_format.h"

namespace kiln::server {

using model::ToolCallFormat;

struct ToolCallOut {
  std::string id;  // "call_<24 hex>"
  std::string name;
  std::string arguments;  // JSON text
};

// What one piece of text adds: content to send and delta.tool_calls entries
// ({"index", "id", "type", "function": {"name", "arguments"}} for a call's first chunk,
// {"index", "function": {"arguments"}} for the later ones).
struct ToolCallDelta {
  std::string content;
  nlohmann::json tool_calls = nlohmann::json::array();
};

class ToolCallParser {
 public:
  // `max_calls`: calls after this many are dropped (parallel_tool_calls false: 1).
  explicit ToolCallParser(size_t max_calls) : max_calls_(max_calls) {}
  virtual ~ToolCallParser() = default;
  ToolCallParser(const ToolCallParser&) = delete;
  ToolCallParser& operator=(const ToolCallParser&) = delete;

  virtual void feed(std::string_view text, ToolCallDelta& out) = 0;
  // The reply ended: releases held-back text, closes an open call.
  virtual void finish(ToolCallDelta& out) = 0;

  const std::vector<ToolCallOut>& calls() const { return calls_; }
  bool any_invalid() const { return invalid_; }

 protected:
  // The call being read (the seen_calls()-th) is kept, not dropped past max_calls.
  bool counted() const { return seen_calls_ < max_calls_; }
  size_t seen_calls() const { return seen_calls_; }
  void count_call() { ++seen_calls_; }
  void mark_invalid() { invalid_ = true; }
  const ToolCallOut& last_call() const { return calls_.back(); }

  // A new call object: nothing of it sent yet.
  void begin_object() {
    header_sent_ = false;
    args_sent_ = 0;
  }
  // Sends the call's first chunk once `object` (its text so far) shows the header
  // `{"name": "<name>", "<arguments_key>": `. Only for a counted call.
  void try_send_header(ToolCallDelta& out, std::string_view object, std::string_view args_key);
  bool header_sent() const { return header_sent_; }
  size_t args_begin() const { return args_begin_; }  // in the object, once the header is sent
  // Sends what `args` (the arguments' text so far) adds to what went out.
  void send_arguments(ToolCallDelta& out, std::string_view args);
  // A call sent at once: its header chunk, then all of its arguments.
  void add_whole_call(ToolCallDelta& out, std::string name, std::string arguments);

 private:
  void add_call(ToolCallDelta& out, std::string name, std::string arguments);

  size_t max_calls_;
  size_t seen_calls_ = 0;
  std::vector<ToolCallOut> calls_;
  bool invalid_ = false;
  bool header_sent_ = false;
  size_t args_begin_ = 0;
  size_t args_sent_ = 0;  // bytes of arguments sent
};

}  // namespace kiln::server
