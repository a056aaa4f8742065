// How a chat template writes tool calls, as one row of facts per format: what the renderer
// writes (chat_template.cc), what the detection picks (chat_template_detect.cc), and what the
// server's request constraint, prompt and reply parser expect (server/tool_request.h,
// server/tool_call_parsers.h). It lives in model/ so that both layers read the same row; the
// parser to use for each format is the server's column of the table (kToolCallParsers in
// server/tool_call_parsers.h), checked against this one.
//
// Adding a format: an enum value, its row here, its detection, its rendering, its parser class
// and its entry in kToolCallParsers, and their tests (tool_call_format_test.cc checks that every
// value has exactly one row and one parser).
#pragma once
#include <array>
#include <cstddef>
#include <string_view>

namespace kiln::model {

enum class ToolCallFormat {
  kNone,       // the template writes no tool format kiln renders: tools are refused
  kHermes,     // Qwen 2.5 / 3: <tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>
  kLlamaJson,  // Llama 3.1: the reply is {"name": ..., "parameters": ...}
  // Qwen2.5-Coder: Hermes, and calls written in a Markdown fence as well,
  // ```json\n{"name": ..., "arguments": ...}\n```, which is how its instruct models write them
  // under their own template (whose example reads {{"name": ...}}). A format of its own rather
  // than a Hermes property: the reply parser, the auto constraint's markers and the rendered
  // example all differ, and a format is what those consumers look up.
  kHermesFenced,
  kMistral,  // Mistral Nemo, Large 2407: [TOOL_CALLS][{"name": ..., "arguments": ...}, ...]
  kCount,    // not a format: how many there are
};

inline constexpr size_t kToolCallFormatCount = static_cast<size_t>(ToolCallFormat::kCount);

// A call syntax's opening and closing text (<tool_call> ... </tool_call>).
struct ToolCallTags {
  std::string_view open, close;
};

struct ToolCallFormatRow {
  ToolCallFormat format;
  std::string_view name;  // for messages and test names
  // The texts that open a call in a reply, the template's own first; a call array (Mistral)
  // has no closing text (its parser finds the array's end). None: the format has no markers
  // (Llama 3.1's whole reply is the call), so an unforced call cannot be constrained either.
  std::array<ToolCallTags, 2> tags = {};
  size_t tag_count = 0;
  // Ends the prompt when tool_choice forces a call, so that the reply starts inside it. Empty:
  // the forced call's JSON is the whole reply.
  std::string_view forced_prefill = {};
  std::string_view arguments_key = "arguments";  // the call object's member holding them
  bool call_array = false;                       // the calls are one JSON array after the marker
  // The markers are control tokens of the model's vocabulary: the reply is decoded with special
  // tokens kept so that the parser (and the auto constraint) can see them.
  bool markers_are_special = false;
  // A forced call may follow a space (Mistral Large 2407's template writes one after the marker).
  bool forced_leading_space = false;
  // With parallel_tool_calls false and an unforced call: generation stops after the first call.
  std::string_view single_call_stop = {};
  bool one_call_per_message = false;    // the template writes one call per assistant turn
  bool doubled_example_braces = false;  // the template's call example reads {{"name": ...}}

  constexpr std::string_view call_open() const { return tags[0].open; }
  constexpr std::string_view call_close() const { return tags[0].close; }
};

inline constexpr std::array<ToolCallFormatRow, kToolCallFormatCount> kToolCallFormats = {{
    {.format = ToolCallFormat::kNone, .name = "none"},
    {.format = ToolCallFormat::kHermes,
     .name = "hermes",
     .tags = {{{"<tool_call>", "</tool_call>"}}},
     .tag_count = 1,
     .forced_prefill = "<tool_call>\n",
     .single_call_stop = "</tool_call>"},
    {.format = ToolCallFormat::kLlamaJson,
     .name = "llama-json",
     .arguments_key = "parameters",
     .one_call_per_message = true},
    {.format = ToolCallFormat::kHermesFenced,
     .name = "hermes-fenced",
     .tags = {{{"<tool_call>", "</tool_call>"}, {"```json\n", "```"}}},
     .tag_count = 2,
     .forced_prefill = "<tool_call>\n",
     .single_call_stop = "</tool_call>",
     .doubled_example_braces = true},
    {.format = ToolCallFormat::kMistral,
     .name = "mistral",
     .tags = {{{"[TOOL_CALLS]", ""}}},
     .tag_count = 1,
     .forced_prefill = "[TOOL_CALLS]",
     .call_array = true,
     .markers_are_special = true,
     .forced_leading_space = true},
}};

// Row i describes the i-th format: looking a format up is indexing.
inline constexpr bool tool_call_rows_in_order() {
  for (size_t i = 0; i < kToolCallFormats.size(); ++i) {
    if (static_cast<size_t>(kToolCallFormats[i].format) != i) return false;
  }
  return true;
}
static_assert(tool_call_rows_in_order(), "kToolCallFormats: one row per format, in enum order");

inline constexpr const ToolCallFormatRow& tool_call_format_row(ToolCallFormat format) {
  return kToolCallFormats[static_cast<size_t>(format)];
}

}  // namespace kiln::model
