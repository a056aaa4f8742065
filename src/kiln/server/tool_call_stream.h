// A model's reply read for tool calls as it streams (ToolCallStream) or whole
// (parse_tool_reply), with the parser of the model's tool-call format (tool_call_parsers.h). The
// whole-reply form feeds the same parser, so a streamed reply assembles to exactly the
// non-streamed one.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/server/tool_call_parsers.h"

namespace kiln::server {

class ToolCallStream {
 public:
  // `opened`: the reply starts inside a call (the prompt ended with the format's forced_prefill:
  // a forced call). `max_calls`: calls after this many are dropped (parallel_tool_calls false:
  // 1).
  explicit ToolCallStream(bool opened, size_t max_calls = SIZE_MAX,
                          ToolCallFormat format = ToolCallFormat::kHermes)
      : parser_(make_tool_call_parser(format, opened, max_calls)) {}

  using Delta = ToolCallDelta;
  Delta feed(std::string_view text) {
    Delta out;
    parser_->feed(text, out);
    return out;
  }
  Delta finish() {  // the reply ended: releases held-back text, closes an open call
    Delta out;
    parser_->finish(out);
    return out;
  }

  const std::vector<ToolCallOut>& calls() const { return parser_->calls(); }
  bool any_invalid() const { return parser_->any_invalid(); }

 private:
  std::unique_ptr<ToolCallParser> parser_;
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
