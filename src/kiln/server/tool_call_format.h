// How a model's chat template writes tool calls: what the request constraint and the reply
// parser (tool_request.h, tool_call_parser.h) expect.
#pragma once

namespace kiln::server {

enum class ToolCallFormat {
  kNone,
  kHermes,     // Qwen: <tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>
  kLlamaJson,  // Llama 3.1: the reply is {"name": ..., "parameters": ...}
  kMistral,    // Mistral Nemo, Large 2407: [TOOL_CALLS][{"name": ..., "arguments": ...}, ...]
};

}  // namespace kiln::server
