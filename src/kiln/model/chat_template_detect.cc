// Which chat format a model's Jinja template writes, from the template text alone: each format
// is recognized by the literal markers its templates spell out. No fallback by architecture or
// vocabulary: a template kiln cannot name is refused rather than rendered in a guessed format.
#include <fmt/format.h>

#include <optional>

#include "kiln/base/error.h"
#include "kiln/model/chat_template.h"

namespace kiln::model {
namespace {

bool has(std::string_view text, std::string_view needle) {
  return text.find(needle) != std::string_view::npos;
}

// A quoted literal in either of Jinja's quote styles: has_literal(t, "[INST] ") finds
// '[INST] ' and "[INST] ", so a marker is told apart from the same text inside a longer string.
bool has_literal(std::string_view text, std::string_view body) {
  return has(text, fmt::format("'{}'", body)) || has(text, fmt::format("\"{}\"", body));
}

// The value of a Jinja string literal whose opening quote is at text[open]; nullopt when it does
// not close. Escapes are Python's (Jinja decodes literals with unicode-escape); the common ones are
// decoded, any other is kept as written.
std::optional<std::string> parse_literal(std::string_view text, size_t open, size_t* end) {
  const char quote = text[open];
  std::string out;
  for (size_t i = open + 1; i < text.size(); ++i) {
    const char c = text[i];
    if (c == quote) {
      *end = i + 1;
      return out;
    }
    if (c != '\\' || i + 1 == text.size()) {
      out += c;
      continue;
    }
    const char e = text[++i];
    switch (e) {
      case 'n':
        out += '\n';
        break;
      case 't':
        out += '\t';
        break;
      case 'r':
        out += '\r';
        break;
      case '\\':
      case '\'':
      case '"':
        out += e;
        break;
      default:
        out += '\\';
        out += e;
    }
  }
  return std::nullopt;
}

// Mistral v7 templates: `{%- set default_system_message = '...' %}`, used only when the whole
// value is one literal (Mistral Small 3.2 splices in today's date, which kiln does not).
std::string mistral_default_system(std::string_view text) {
  constexpr std::string_view kSet = "set default_system_message = ";
  const size_t at = text.find(kSet);
  if (at == std::string_view::npos) return {};
  const size_t open = at + kSet.size();
  if (open >= text.size() || (text[open] != '\'' && text[open] != '"')) return {};
  size_t end = 0;
  auto value = parse_literal(text, open, &end);
  if (!value) return {};
  while (end < text.size() && text[end] == ' ') ++end;
  return text.substr(end, 2) == "%}" ? *value : std::string();
}

// ChatML templates that write a whole system turn as one literal,
// '<|im_start|>system\nYou are Qwen, ...<|im_end|>\n', do so when the conversation has no system
// message (Qwen 2.5): that literal's content.
std::string chatml_default_system(std::string_view text) {
  constexpr std::string_view kOpen = "<|im_start|>system";
  for (size_t at = text.find(kOpen); at != std::string_view::npos; at = text.find(kOpen, at + 1)) {
    if (at == 0 || (text[at - 1] != '\'' && text[at - 1] != '"')) continue;
    size_t end = 0;
    auto value = parse_literal(text, at - 1, &end);
    if (!value) continue;
    constexpr std::string_view kHead = "<|im_start|>system\n";
    constexpr std::string_view kTail = "<|im_end|>\n";
    if (value->size() > kHead.size() + kTail.size() && value->starts_with(kHead) &&
        value->ends_with(kTail)) {
      return value->substr(kHead.size(), value->size() - kHead.size() - kTail.size());
    }
  }
  return {};
}

std::optional<ChatTemplate> match(std::string_view t) {
  using K = ChatTemplateKind;
  if (has(t, "<start_of_turn>")) {
    // Gemma 3 prepends the system message to the first turn; Gemma 1 and 2 refuse it.
    return ChatTemplate{has(t, "first_user_prefix") ? K::kGemma3 : K::kGemma, {}};
  }
  if (has(t, "<|start_header_id|>")) {
    if (!has(t, "Cutting Knowledge Date")) return ChatTemplate{K::kLlama3, {}};
    // Llama 3.1's JSON tool calls, with tools in the first user message by default.
    ChatTemplate llama31{K::kLlama31, {}};
    if (has(t, "tools_in_user_message") && has(t, "Environment: ipython") &&
        has(t, "\"parameters\": ")) {
      llama31.tool_calls = ToolCallFormat::kLlamaJson;
    }
    return llama31;
  }
  if (has(t, "<|im_start|>")) {
    // Phi-4 (<|im_sep|>) and SmolVLM (<end_of_utterance>) borrow the markers but not the format.
    if (has(t, "<|im_sep|>") || has(t, "<end_of_utterance>")) return std::nullopt;
    // Qwen's tool format (Hermes style): tools, calls and results, all three.
    const bool tools = has(t, "<tools>") && has(t, "<tool_call>") && has(t, "<tool_response>");
    const ToolCallFormat hermes = tools ? ToolCallFormat::kHermes : ToolCallFormat::kNone;
    if (has(t, "last_query_index") && has(t, "</think>")) {
      return ChatTemplate{K::kQwen3, {}, hermes};
    }
    // Qwen2.5-Coder's example call, {{"name": ...}}: its models also write calls in a fence.
    const bool coder = tools && has(t, "<tool_call>\\n{{\\\"name\\\": <function-name>");
    return ChatTemplate{K::kChatML, chatml_default_system(t),
                        coder ? ToolCallFormat::kHermesFenced : hermes};
  }
  if (has(t, "[INST]")) {
    if (has(t, "[SYSTEM_PROMPT]")) {
      ChatTemplate v7{has(t, "[SYSTEM_PROMPT] ") ? K::kMistralV7 : K::kMistralV7Tekken, {}};
      if (v7.kind == K::kMistralV7Tekken) v7.default_system = mistral_default_system(t);
      if (has(t, "[TOOL_CALLS]")) {
        v7.unsupported_tools = has(t, "[ARGS]")
                                   ? "Mistral's [TOOL_CALLS]name[ARGS]{...} format (Mistral Small "
                                     "3.2, Devstral), which kiln does not render"
                                   : "a [TOOL_CALLS] layout kiln has not been checked against";
      }
      return v7;
    }
    if (has_literal(t, " [INST] ")) return ChatTemplate{K::kMistralV1, {}};
    // Mistral's [TOOL_CALLS] JSON format (Nemo, Large 2407): tools, calls with their ids and
    // results, all written by the template.
    const bool tools = has(t, "[AVAILABLE_TOOLS]") && has(t, "[TOOL_CALLS]") &&
                       has(t, "[TOOL_RESULTS]") && has(t, "\"call_id\": \"") && !has(t, "[ARGS]");
    // Llama 2 style templates also write '[INST] ' but close with ' [/INST]'.
    std::optional<ChatTemplate> v3;
    if (has_literal(t, "[INST] ") && !has_literal(t, " [/INST]")) {
      v3 = ChatTemplate{K::kMistralV3, {}};
    } else if (has_literal(t, "[INST]")) {
      v3 = ChatTemplate{K::kMistralV3Tekken, {}};
    }
    if (v3 && tools) v3->tool_calls = ToolCallFormat::kMistral;
    return v3;
  }
  // Command-R's plain template (Command-R, R+, Aya): its turn markers without the tool-use and
  // RAG preambles (R+'s tool_use template) or Command R7B's <|START_RESPONSE|> blocks.
  if (has_literal(t, "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>") &&
      has_literal(t, "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>") && !has(t, "<|START_RESPONSE|>") &&
      !has(t, "Safety Preamble") && !has(t, "tools") && !has(t, "documents")) {
    return ChatTemplate{K::kCommandR, {}};
  }
  // DeepSeek-V2's: 'User: ', 'Assistant: ' and the generation prompt 'Assistant:'.
  if (has_literal(t, "User: ") && has_literal(t, "Assistant: ") && has_literal(t, "Assistant:") &&
      has(t, "eos_token") && !has(t, "tools")) {
    return ChatTemplate{K::kDeepSeekV2, {}};
  }
  // Phi-3 templates that write the role generically or a system turn; Phi-3-mini's first
  // template dropped system messages and is not this format.
  if (has(t, "<|user|>") && has(t, "<|assistant|>") && has(t, "<|end|>") &&
      (has(t, "<|system|>") || has(t, "'<|' + message['role'] + '|>'"))) {
    return ChatTemplate{K::kPhi3, {}};
  }
  return std::nullopt;
}

// The template's first characters on one line, for the error message.
std::string opening(std::string_view t) {
  constexpr size_t kShown = 40;
  std::string out;
  bool space = false;
  size_t i = 0;
  for (; i < t.size() && out.size() < kShown; ++i) {
    const char c = t[i];
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += c;
  }
  // Finish a UTF-8 sequence cut at the limit.
  while (i < t.size() && (static_cast<unsigned char>(t[i]) & 0xC0) == 0x80) out += t[i++];
  if (i < t.size()) out += "...";
  return out;
}

}  // namespace

std::string_view chat_template_name(ChatTemplateKind kind) {
  switch (kind) {
    case ChatTemplateKind::kGemma:
      return "gemma";
    case ChatTemplateKind::kGemma3:
      return "gemma3";
    case ChatTemplateKind::kLlama3:
      return "llama3";
    case ChatTemplateKind::kLlama31:
      return "llama3.1";
    case ChatTemplateKind::kChatML:
      return "chatml";
    case ChatTemplateKind::kQwen3:
      return "qwen3";
    case ChatTemplateKind::kMistralV1:
      return "mistral-v1";
    case ChatTemplateKind::kMistralV3:
      return "mistral-v3";
    case ChatTemplateKind::kMistralV3Tekken:
      return "mistral-v3-tekken";
    case ChatTemplateKind::kMistralV7:
      return "mistral-v7";
    case ChatTemplateKind::kMistralV7Tekken:
      return "mistral-v7-tekken";
    case ChatTemplateKind::kPhi3:
      return "phi3";
    case ChatTemplateKind::kCommandR:
      return "command-r";
    case ChatTemplateKind::kDeepSeekV2:
      return "deepseek-v2";
  }
  return "unknown";
}

ChatTemplate detect_chat_template(std::string_view jinja) {
  constexpr std::string_view kSupported =
      "supported: gemma, gemma3, llama3, llama3.1, chatml, qwen3, mistral-v1, mistral-v3, "
      "mistral-v3-tekken, mistral-v7, mistral-v7-tekken, phi3, command-r, deepseek-v2";
  if (jinja.find_first_not_of(" \t\r\n") == std::string_view::npos) {
    fail(
        "the model file has no chat template (tokenizer.chat_template), so kiln cannot format "
        "chat messages for it; send plain-text prompts instead");
  }
  if (auto t = match(jinja)) return *t;
  fail("the model's chat template is not one kiln renders (starts: '{}'); {}", opening(jinja),
       kSupported);
}

}  // namespace kiln::model
