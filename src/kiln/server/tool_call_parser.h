// Reads tool calls out of a model's reply in Qwen 2.5's (Hermes style) format:
//   [text]<tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>[\n<tool_call>...]
// incrementally, so that a stream can send OpenAI's delta.tool_calls chunks as the text arrives
// and never sends a call's text as content. The whole-reply form (parse_tool_reply) feeds the
// same parser, so a streamed reply assembles to exactly the non-streamed one.
//
// Arguments are the model's own text of the "arguments" value (so they can stream as they are
// generated) when the call is written name first, as the format shows; otherwise the value
// re-serialized once the call is complete. A call whose text is not a JSON object with a string
// "name" and an "arguments" value is invalid: the whole-reply form then gives the reply as
// content with no calls; a stream cannot take back what it sent, and drops it.
//
// ToolCallFormat::kHermesFenced also takes a call written as ```json\n{...}\n``` (Qwen2.5-Coder).
//
// Llama 3.1's format (ToolCallFormat::kLlamaJson) has no markers: a reply that starts with "{"
// is held back whole and, when it is {"name": ..., "parameters": ...}, is one call (arguments
// re-serialized); any other reply is content as it streams.
//
// Mistral's format (ToolCallFormat::kMistral): [text][TOOL_CALLS][{"name": "f", "arguments":
// {...}}, ...] (whitespace allowed around the JSON; each object may also carry a string "id",
// which is ignored: replies get kiln's ids). The array's objects are read one by one as the
// text arrives, arguments streaming as for Qwen's format; text after the array is dropped and
// a later [TOOL_CALLS] opens another array. An array that is not valid JSON of call objects
// (or is cut off) makes the reply invalid as above.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/server/tool_call_format.h"

namespace kiln::server {

// The marker Mistral's replies open their calls with (a control token in Mistral's own
// vocabularies: the route decodes the reply with special tokens kept so that it shows).
inline constexpr std::string_view kMistralMarker = "[TOOL_CALLS]";

struct ToolCallOut {
  std::string id;  // "call_<24 hex>"
  std::string name;
  std::string arguments;  // JSON text
};

// A call syntax's opening and closing text (<tool_call> ... </tool_call>).
struct ToolCallTags {
  std::string_view open, close;
};

class ToolCallStream {
 public:
  // `opened`: the reply starts inside a call (the prompt ended with "<tool_call>\n": a forced
  // call; Mistral: the prompt ended with "[TOOL_CALLS]" and the reply starts with the array).
  // `max_calls`: calls after this many are dropped (parallel_tool_calls false: 1).
  explicit ToolCallStream(bool opened, size_t max_calls = SIZE_MAX,
                          ToolCallFormat format = ToolCallFormat::kHermes);

  // What one piece of text adds: content to send and delta.tool_calls entries
  // ({"index", "id", "type", "function": {"name", "arguments"}} for a call's first chunk,
  // {"index", "function": {"arguments"}} for the later ones).
  struct Delta {
    std::string content;
    nlohmann::json tool_calls = nlohmann::json::array();
  };
  Delta feed(std::string_view text);
  Delta finish();  // the reply ended: releases held-back text, closes an open call

  const std::vector<ToolCallOut>& calls() const { return calls_; }
  bool any_invalid() const { return invalid_; }

 private:
  void scan(Delta& out, bool at_end);
  void scan_call(Delta& out, bool at_end);
  bool close_call(Delta& out, std::string_view inner);
  void send_arguments(Delta& out, std::string_view args);
  void feed_llama(Delta& out, bool at_end);
  void add_whole_call(Delta& out, std::string name, std::string arguments);
  ToolCallTags tag(size_t t) const;
  size_t find_open(size_t& which) const;
  size_t partial_open_at_end() const;
  size_t tag_count() const;
  // Mistral's call array (tool_call_parser_mistral.cc).
  void open_array();
  void scan_array(Delta& out, bool at_end);
  bool scan_array_call(Delta& out, bool at_end);
  bool close_array_call(Delta& out, std::string_view object);
  void fail_array();

  enum class Mode { kText, kCall, kBetween, kUndecided, kJsonReply, kArray } mode_;
  ToolCallFormat format_;
  size_t max_calls_;
  std::string pending_;     // text not yet given out
  std::string held_space_;  // trailing whitespace of the content (dropped before a call)
  size_t call_tag_ = 0;     // the open call's tags (0: <tool_call>, 1: a ```json fence)
  bool header_sent_ = false;
  size_t args_begin_ = 0;  // in pending_ (the call's inner text) once the header is sent
  size_t args_sent_ = 0;   // bytes of arguments sent
  std::vector<ToolCallOut> calls_;
  size_t seen_calls_ = 0;
  bool invalid_ = false;
  // Mistral's array: what comes next, and the structure of the call object being read.
  enum class ArrayStep { kOpen, kItem, kCall, kAfter } step_ = ArrayStep::kOpen;
  bool array_empty_ = true;  // no item yet ("[]" closes it)
  size_t scanned_ = 0;       // bytes of the call object (at pending_'s start) scanned
  int depth_ = 0;
  bool in_string_ = false, escaped_ = false;
  size_t args_end_ = std::string::npos;  // where the arguments value ends, once seen
};

struct ToolReply {
  std::optional<std::string> content;  // null when a call follows no text
  std::vector<ToolCallOut> calls;
};
ToolReply parse_tool_reply(std::string_view text, bool opened, size_t max_calls = SIZE_MAX,
                           ToolCallFormat format = ToolCallFormat::kHermes);

// OpenAI's message.tool_calls array.
nlohmann::json tool_calls_json(const std::vector<ToolCallOut>& calls);

}  // namespace kiln::server
