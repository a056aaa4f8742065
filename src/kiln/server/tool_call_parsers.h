// One ToolCallParser class per tool-call syntax, and the table that says which one reads each
// format (the parser column of model/tool_call_format.h's table; the classes take their
// markers and keys from the format's row):
//
//  HermesCallParser (kHermes, kHermesFenced), tool_call_parser_hermes.cc:
//    [text]<tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>[\n<tool_call>...]
//    kHermesFenced's row adds a second syntax, a call written as ```json\n{...}\n```
//    (Qwen2.5-Coder).
//  LlamaJsonCallParser (kLlamaJson), tool_call_parser_llama.cc: no markers; a reply that starts
//    with "{" is held back whole and, when it is {"name": ..., "parameters": ...}, is one call
//    (arguments re-serialized); any other reply is content as it streams.
//  MistralCallParser (kMistral), tool_call_parser_mistral.cc: [text][TOOL_CALLS][{"name": "f",
//    "arguments": {...}}, ...] (whitespace allowed around the JSON; each object may also carry
//    a string "id", which is ignored: replies get kiln's ids). The array's objects are read one
//    by one as the text arrives, arguments streaming as for Hermes; text after the array is
//    dropped and a later [TOOL_CALLS] opens another array. An array that is not valid JSON of
//    call objects (or is cut off) makes the reply invalid.
//  PlainTextParser (kNone): no calls; the reply is content.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "kiln/model/tool_call_format.h"
#include "kiln/server/tool_call_parser.h"

namespace kiln::server {

using model::ToolCallFormatRow;

// Calls opened by a marker (tool_call_parser_marked.cc): the text before a call streams out as
// content (less the whitespace before the call), a partial marker at the end of the text is held
// back until the next piece decides, and text between calls is not content.
class MarkedCallParser : public ToolCallParser {
 public:
  MarkedCallParser(const ToolCallFormatRow& format, size_t max_calls);
  void feed(std::string_view text, ToolCallDelta& out) final;
  void finish(ToolCallDelta& out) final;

 protected:
  // The reply starts inside a call opened by the first marker (the prompt ended with it).
  void start_opened();
  // The format's marker `which` (format().tags) was read: a call (or call array) begins.
  virtual void open_call(size_t which) = 0;
  // pending() starts with the open call's text. Reads what it can; true once the call is over
  // (its text consumed from pending()).
  virtual bool scan_call(ToolCallDelta& out, bool at_end) = 0;
  std::string& pending() { return pending_; }
  const ToolCallFormatRow& format() const { return format_; }

 private:
  void scan(ToolCallDelta& out, bool at_end);
  size_t find_open(size_t& which) const;
  size_t partial_open_at_end() const;
  void give_text(ToolCallDelta& out, bool at_end);

  enum class Mode { kText, kCall, kBetween } mode_ = Mode::kText;
  const ToolCallFormatRow& format_;
  std::string pending_;     // text not yet given out
  std::string held_space_;  // trailing whitespace of the content (dropped before a call)
};

class HermesCallParser final : public MarkedCallParser {
 public:
  HermesCallParser(const ToolCallFormatRow& format, bool opened, size_t max_calls);

 private:
  void open_call(size_t which) override;
  bool scan_call(ToolCallDelta& out, bool at_end) override;
  bool close_call(ToolCallDelta& out, std::string_view inner);

  size_t call_tag_ = 0;  // the open call's syntax (0: <tool_call>, 1: a ```json fence)
};

class MistralCallParser final : public MarkedCallParser {
 public:
  MistralCallParser(const ToolCallFormatRow& format, bool opened, size_t max_calls);

 private:
  void open_call(size_t which) override;
  bool scan_call(ToolCallDelta& out, bool at_end) override;
  bool scan_array_call(ToolCallDelta& out, bool at_end);
  bool close_array_call(ToolCallDelta& out, std::string_view object);
  void fail_array();

  // What comes next in the array (kDone: it ended, or was no array of calls), and the
  // structure of the call object being read.
  enum class Step { kOpen, kItem, kCall, kAfter, kDone } step_ = Step::kOpen;
  bool array_empty_ = true;  // no item yet ("[]" closes it)
  size_t scanned_ = 0;       // bytes of the call object (at pending()'s start) scanned
  int depth_ = 0;
  bool in_string_ = false, escaped_ = false;
  size_t args_end_ = std::string::npos;  // where the arguments value ends, once seen
};

class LlamaJsonCallParser final : public ToolCallParser {
 public:
  // `opened` is not used: a forced call has no prefill (the JSON is the whole reply).
  LlamaJsonCallParser(const ToolCallFormatRow& format, bool opened, size_t max_calls);
  void feed(std::string_view text, ToolCallDelta& out) override;
  void finish(ToolCallDelta& out) override;

 private:
  void decide(ToolCallDelta& out, bool at_end);

  enum class Mode { kUndecided, kText, kJsonReply } mode_ = Mode::kUndecided;
  const ToolCallFormatRow& format_;
  std::string pending_;
};

class PlainTextParser final : public ToolCallParser {
 public:
  PlainTextParser(const ToolCallFormatRow& /*format*/, bool /*opened*/, size_t max_calls)
      : ToolCallParser(max_calls) {}
  void feed(std::string_view text, ToolCallDelta& out) override { out.content += text; }
  void finish(ToolCallDelta& /*out*/) override {}
};

// The parser column of the format table: entry i reads format i.
struct ToolCallParserEntry {
  ToolCallFormat format;
  std::unique_ptr<ToolCallParser> (*make)(const ToolCallFormatRow&, bool opened, size_t max_calls);
};

template <class Parser>
std::unique_ptr<ToolCallParser> make_parser(const ToolCallFormatRow& format, bool opened,
                                            size_t max_calls) {
  return std::make_unique<Parser>(format, opened, max_calls);
}

inline constexpr std::array<ToolCallParserEntry, model::kToolCallFormatCount> kToolCallParsers = {{
    {ToolCallFormat::kNone, &make_parser<PlainTextParser>},
    {ToolCallFormat::kHermes, &make_parser<HermesCallParser>},
    {ToolCallFormat::kLlamaJson, &make_parser<LlamaJsonCallParser>},
    {ToolCallFormat::kHermesFenced, &make_parser<HermesCallParser>},
    {ToolCallFormat::kMistral, &make_parser<MistralCallParser>},
}};

// (The entries' pointers are checked non-null by tests/server/tool_call_format_test.cc, not
// here: GCC's -fsanitize=null makes a pointer's comparison with null non-constant, which broke
// this assert in the sanitize build.)
inline constexpr bool tool_call_parsers_in_order() {
  for (size_t i = 0; i < kToolCallParsers.size(); ++i) {
    if (static_cast<size_t>(kToolCallParsers[i].format) != i) return false;
  }
  return true;
}
static_assert(tool_call_parsers_in_order(), "kToolCallParsers: one parser per format, in order");

// The parser for `format`. `opened`: the reply starts inside a call (the prompt ended with the
// format's forced_prefill).
inline std::unique_ptr<ToolCallParser> make_tool_call_parser(ToolCallFormat format, bool opened,
                                                             size_t max_calls = SIZE_MAX) {
  return kToolCallParsers[static_cast<size_t>(format)].make(model::tool_call_format_row(format),
                                                            opened, max_calls);
}

}  // namespace kiln::server
