// The tool-calling side of an OpenAI chat request: `tools`, `tool_choice`,
// `parallel_tool_calls`, and the history's assistant tool calls and `tool` results. Every
// malformed field is a 400 naming it. Also what the route derives from them: the tool
// definitions as the chat template writes them, and the constraint that forces a call.
#pragma once
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kiln/engine/json/json_schema.h"
#include "kiln/server/parsed_requests.h"

namespace kiln::server {

// tools, tool_choice and parallel_tool_calls of a chat request body.
ChatTools read_chat_tools(const nlohmann::json& body);

// The tool_calls of an assistant message (`path` is the message's, "messages[2]"): each call's
// function name and its arguments (a JSON string, as OpenAI sends them) re-encoded as the
// template's `| tojson` writes them. Also returns the calls' ids in `ids`.
std::vector<model::ChatToolCall> read_history_tool_calls(const nlohmann::json& calls,
                                                         const std::string& path,
                                                         std::vector<std::string>& ids);

// Each tool definition of the request as `| tojson` writes it, keys in the order the client
// sent them: `body` is the request parsed with key order kept.
std::vector<std::string> render_tool_definitions(const nlohmann::ordered_json& body);

// What a forced call (tool_choice "required" or a named function) is constrained to: the text
// after the format's forced_prefill ("<tool_call>\n") is {"name": <an allowed name>,
// <arguments_key>: <that function's parameters>} (JsonSchema::compile_tool_call), or for a
// call_array format (Mistral's) a JSON array of such objects (at most one with
// parallel_tool_calls false). A schema the compiler refuses is a 400 naming the keyword in
// tools[i].function.parameters.
std::shared_ptr<const engine::JsonSchema> compile_forced_call(const ChatTools& tools,
                                                              ToolCallFormat format);

// Every tool's parameters compile (cached, json_schema_cache.h); else a 400 naming the tool's
// keyword, whatever the tool_choice: a schema kiln cannot enforce is never silently dropped.
void check_tool_schemas(const ChatTools& tools);

// The texts after which an unforced call's JSON is constrained: the format's opening markers.
std::vector<std::string> auto_call_markers(ToolCallFormat format);

// tool_choice "auto": the same constraint over every tool, for the JSON the model writes after
// it opens a call itself (SamplingParams::json_after: auto_call_markers). Refuses what
// check_tool_schemas refuses. Null for a format without markers (Llama 3.1's), whose calls have
// nothing to start the constraint at.
std::shared_ptr<const engine::JsonSchema> compile_auto_calls(const ChatTools& tools,
                                                             ToolCallFormat format);

}  // namespace kiln::server
