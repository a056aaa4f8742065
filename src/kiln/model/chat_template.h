// Built-in chat formats. kiln does not run Jinja: it recognizes which format a model's
// tokenizer.chat_template writes, from the template text alone, and renders that format itself.
// A template that matches none of them (or a file without one) is refused: chat then fails with
// one error that says so, instead of producing a prompt in some other model's format.
//
//  gemma:    <start_of_turn>user\n{content}<end_of_turn>\n ... <start_of_turn>model\n
//            (Gemma 1/2: no system role; contents trimmed; user/assistant alternate)
//  gemma3:   as gemma, a leading system message + "\n\n" opens the first turn (untrimmed)
//  llama3:   <|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|> ...
//            <|start_header_id|>assistant<|end_header_id|>\n\n   (contents trimmed)
//  llama3.1: as llama3, always opening with a system turn "Cutting Knowledge Date: December
//            2023\nToday Date: 26 Jul 2024\n\n{system}" (3.1-3.3; kiln writes the date 3.1's
//            template writes by default, not today's). Templates with its JSON tool format
//            get ToolCallFormat::kLlamaJson: "Environment: ipython" in the system turn, the tools
//            (tojson, indent 4) and instructions opening the first user turn, a call as the
//            assistant turn {"name": ..., "parameters": ...} (one per turn), results as
//            ipython turns holding the content as a JSON string.
//  chatml:   <|im_start|>{role}\n{content}<|im_end|>\n ... <|im_start|>assistant\n
//            (plus the template's default system message, when it has one, as Qwen 2.5's).
//            Templates that also write Qwen 2.5's tool format (Hermes style) get
//            ToolCallFormat::kHermes (Qwen2.5-Coder's: kHermesFenced): a "# Tools" block with
//            one JSON line per tool in the system turn, assistant calls as
//            <tool_call>\n{"name": ..., "arguments": ...}\n</tool_call>, and consecutive
//            `tool` messages as <tool_response> blocks in one user turn.
//  qwen3:    chatml; assistant turns after the last user turn get an empty <think> block, and
//            "<think>...</think>" reasoning is dropped from earlier ones; tools as chatml's
//            (no default system message; a call follows content on a new line)
//  mistral-v1:  " [INST] {system}\n\n{user} [/INST] {assistant}</s>"
//  mistral-v3:  "[INST] {user}[/INST] {assistant|trim}</s>"; the system message goes before
//               the LAST user message
//  mistral-v3-tekken: "[INST]{user}[/INST]{assistant}</s>"; system as in v3
//               Templates of both that write Mistral's [TOOL_CALLS] JSON format (Mistral Nemo,
//               Large 2407) get ToolCallFormat::kMistral:
//               "[AVAILABLE_TOOLS][{tools}][/AVAILABLE_TOOLS]" before the last user turn, a
//               call turn "[TOOL_CALLS][{"name": ..., "arguments": ..., "id": ...}, ...]</s>",
//               results "[TOOL_RESULTS]{"content": ..., "call_id":
//               ...}[/TOOL_RESULTS]" (v3 puts a space after each opening marker); call ids are
//               mapped to the 9 letters and digits the templates require (mistral_call_id.h)
//  mistral-v7:  "[SYSTEM_PROMPT] {system}[/SYSTEM_PROMPT][INST] {user}[/INST] {assistant}</s>"
//  mistral-v7-tekken: "[SYSTEM_PROMPT]{system}[/SYSTEM_PROMPT][INST]{user}[/INST]{assistant}</s>"
//               (plus the template's default system message when it is a plain literal)
//  phi3:     <|{role}|>\n{content}<|end|>\n ... <|assistant|>\n
//  command-r: <|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>{system}<|END_OF_TURN_TOKEN|> (when the
//            conversation opens with one), then <|START_OF_TURN_TOKEN|><|USER_TOKEN|> or
//            <|CHATBOT_TOKEN|> + content.strip() + <|END_OF_TURN_TOKEN|>, user/assistant
//            alternating; <|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|> to generate (Command-R,
//            Command-R+, Aya 23 and Aya Expanse without tools)
//  deepseek-v2: "User: {user}\n\n", "Assistant: {assistant}<｜end▁of▁sentence｜>", a system
//            message as "{system}\n\n"; "Assistant:" to generate (DeepSeek-V2 and V2-Lite Chat)
//
// The output never contains BOS: encode the prompt with add_special = true (and parse_special =
// true so that the turn markers become their control tokens).
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "kiln/model/chat_message.h"
#include "kiln/model/tool_call_format.h"

namespace kiln::model {

enum class ChatTemplateKind {
  kGemma,
  kGemma3,
  kLlama3,
  kLlama31,
  kChatML,
  kQwen3,
  kMistralV1,
  kMistralV3,
  kMistralV3Tekken,
  kMistralV7,
  kMistralV7Tekken,
  kPhi3,
  kCommandR,
  kDeepSeekV2,
};

// A recognized template: its format plus what the template text adds on its own.
struct ChatTemplate {
  ChatTemplateKind kind = ChatTemplateKind::kChatML;
  // Written as the system message when the conversation has none (chatml, mistral-v7-tekken).
  std::string default_system = {};
  // The tool-call format the template writes (tool_call_format.h): with one, tools, `tool`
  // messages and assistant tool calls render; without, they are refused.
  ToolCallFormat tool_calls = ToolCallFormat::kNone;
  // For a template that writes some tool format kiln does not render: what it is, for the
  // refusal (Mistral Small 3.2's "[TOOL_CALLS]name[ARGS]{...}").
  std::string unsupported_tools = {};
  bool takes_tools() const { return tool_calls != ToolCallFormat::kNone; }
};

std::string_view chat_template_name(ChatTemplateKind kind);

// The format of the model's Jinja template (tokenizer.chat_template), read from its text alone.
// Throws kiln::Error when the text is empty (the file has no chat template) or matches no format
// kiln renders; the message names the problem and the supported formats.
ChatTemplate detect_chat_template(std::string_view jinja_template);

// Throws kiln::Error where the model's own template raises (roles that do not alternate where the
// format requires it, a system message the format cannot place), for roles other than system,
// user and assistant (and tool, with a tool format), and for an empty message list.
// `tools`: the request's tool definitions, each as JSON text (`| tojson`, keys in the client's
// order; formats that indent them re-read it); a template without a tool format refuses them
// (and tool calls in the history).
std::string apply_chat_template(const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages,
                                bool add_generation_prompt,
                                const std::vector<std::string>& tools = {});

// Why `tmpl` cannot take tools (names its family), or empty when it can.
std::string chat_tools_refusal(const ChatTemplate& tmpl);
inline std::string apply_chat_template(ChatTemplateKind kind,
                                       const std::vector<ChatMessage>& messages,
                                       bool add_generation_prompt) {
  return apply_chat_template(ChatTemplate{kind, {}}, messages, add_generation_prompt);
}

}  // namespace kiln::model
