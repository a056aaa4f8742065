// How a model's chat template writes tool calls: what the request constraint and the reply
// parser (tool_request.h, tool_call_parser.h) expect.
#pragma once

namespace kiln::server {

enum class ToolCallFormat {
  kNone,
  kHermes,     // Qwen: <tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>
  kLlamaJson,  // Llama 3.1: the reply is {"name": ..., "parameters": ...}
  // Qwen2.5-Coder: Hermes, and calls written in a Markdown fence as well,
  // ```json\n{"name": ..., "arguments": ...}\n```, which is how its instruct models write them
  // under their own template (whose example reads {{"name": ...}}).
  kHermesFenced,
  kMistral,  // Mistral Nemo, Large 2407: [TOOL_CALLS][{"name": ..., "arguments": ...}, ...]
};

inline bool hermes_style(ToolCallFormat f) {
  return f == ToolCallFormat::kHermes || f == ToolCallFormat::kHermesFenced;
}

}  // namespace kiln::server
