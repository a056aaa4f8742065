// Renders each chat format the way the models' own Jinja templates do (tests compare the two
// byte for byte on the publishers' templates), leaving out BOS and refusing what they refuse.
#include "kiln/model/chat_template.h"

#include <span>

#include "kiln/base/bounded_json.h"
#include "kiln/base/error.h"
#include "kiln/model/jinja_json.h"
#include "kiln/model/mistral_call_id.h"

namespace kiln::model {
namespace {

using Messages = std::span<const ChatMessage>;

// Whitespace as Python's str.isspace() sees it, which Jinja's |trim and str.strip() use: ASCII
// whitespace, the separators \x1c-\x1f, and Unicode spaces (U+0085, U+00A0, U+2000-U+200A, ...).
// Returns the byte length of the whitespace character at s[i], or 0.
size_t space_at(std::string_view s, size_t i) {
  const auto b = [&](size_t k) {
    return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0;
  };
  const unsigned char c = b(0);
  if (c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F)) return 1;
  if (c == 0xC2 && (b(1) == 0x85 || b(1) == 0xA0)) return 2;
  if (c == 0xE1 && b(1) == 0x9A && b(2) == 0x80) return 3;  // U+1680
  // (A cut-off E2 80 at the end reads its missing third byte as 0, which is <= 0x8A: the
  // length check keeps that from counting as a 3-byte space past the end; found by fuzzing.)
  if (c == 0xE2 && b(1) == 0x80 && i + 2 < s.size()) {
    const unsigned char d = b(2);
    if (d <= 0x8A || d == 0xA8 || d == 0xA9 || d == 0xAF) return 3;  // U+2000-200A, 2028/9, 202F
  }
  if (c == 0xE2 && b(1) == 0x81 && b(2) == 0x9F) return 3;  // U+205F
  if (c == 0xE3 && b(1) == 0x80 && b(2) == 0x80) return 3;  // U+3000
  return 0;
}

// Jinja's |trim (Python's str.strip()).
std::string py_strip(std::string_view s) {
  size_t begin = 0;
  while (size_t n = space_at(s, begin)) begin += n;
  // Scan forward so that multi-byte spaces are seen whole; remember where the last run began.
  size_t end = begin;
  for (size_t i = begin; i < s.size();) {
    if (size_t n = space_at(s, i)) {
      i += n;
    } else {
      i += 1;
      while (i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) ++i;
      end = i;
    }
  }
  return std::string(s.substr(begin, end - begin));
}

std::string_view strip_newlines_left(std::string_view s) {
  while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
  return s;
}
std::string_view strip_newlines_right(std::string_view s) {
  while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
  return s;
}

void check_roles(const ChatTemplate& tmpl, Messages messages) {
  const ChatTemplateKind kind = tmpl.kind;
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& r = messages[i].role;
    if (r == "tool" && tmpl.takes_tools()) continue;
    if (r != "system" && r != "user" && r != "assistant") {
      fail("chat template {} cannot take role '{}' (message {}); roles: system, user, assistant{}",
           chat_template_name(kind), r, i, tmpl.takes_tools() ? ", tool" : "");
    }
    if (!messages[i].tool_calls.empty()) {
      if (r != "assistant") fail("message {}: only assistant messages carry tool calls", i);
      if (!tmpl.takes_tools()) {
        fail("{} (message {} carries tool calls)", chat_tools_refusal(tmpl), i);
      }
      if (tool_call_format_row(tmpl.tool_calls).one_call_per_message &&
          messages[i].tool_calls.size() > 1) {
        fail("chat template {} takes one tool call per assistant message (message {} has {})",
             chat_template_name(kind), i, messages[i].tool_calls.size());
      }
    }
  }
}

// The check Gemma's and Mistral's templates make: from `first` on, user at even positions, other
// roles at odd ones. Message numbers in the error count from the start of the conversation.
void check_alternation(ChatTemplateKind kind, Messages messages, size_t first) {
  for (size_t i = first; i < messages.size(); ++i) {
    if ((messages[i].role == "user") != ((i - first) % 2 == 0)) {
      fail(
          "chat template {}: after an optional leading system message, roles must alternate "
          "user/assistant starting with user (message {} is '{}')",
          chat_template_name(kind), i, messages[i].role);
    }
  }
}

void refuse_system_after(ChatTemplateKind kind, Messages messages, size_t first) {
  for (size_t i = first; i < messages.size(); ++i) {
    if (messages[i].role == "system") {
      fail("chat template {} takes a system message only as the first message (message {})",
           chat_template_name(kind), i);
    }
  }
}

bool leads_with_system(Messages m) { return m[0].role == "system"; }

std::string render_gemma(ChatTemplateKind kind, Messages messages, bool add_generation_prompt) {
  std::string prefix;
  size_t first = 0;
  if (leads_with_system(messages)) {
    if (kind == ChatTemplateKind::kGemma) {
      fail("chat template gemma has no system role (Gemma 1 and 2 models take none)");
    }
    prefix = messages[0].content + "\n\n";  // Gemma 3 does not trim the system message
    first = 1;
  }
  refuse_system_after(kind, messages, first);
  check_alternation(kind, messages, first);
  std::string out;
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    out += m.role == "user" ? "<start_of_turn>user\n" : "<start_of_turn>model\n";
    if (i == first) out += prefix;
    out += py_strip(m.content) + "<end_of_turn>\n";
  }
  if (add_generation_prompt) out += "<start_of_turn>model\n";
  return out;
}

void append_llama3_turn(std::string& out, std::string_view role, std::string_view content) {
  out += "<|start_header_id|>";
  out += role;
  out += "<|end_header_id|>\n\n";
  out += content;
  out += "<|eot_id|>";
}

// Llama 3.1's tools open the first user turn (its default tools_in_user_message), each written
// with tojson(indent=4).
std::string llama_tools_preamble(const std::vector<std::string>& tools) {
  std::string out =
      "Given the following functions, please respond with a JSON for a function call with its "
      "proper arguments that best answers the given prompt.\n\nRespond in the format "
      "{\"name\": function name, \"parameters\": dictionary of argument name and its value}."
      "Do not use variables.\n\n";
  for (const std::string& tool : tools) {
    const auto value = parse_ordered_json_bounded(tool);
    if (value.is_discarded()) fail("a tool definition is not JSON: {}", tool.substr(0, 64));
    out += jinja_tojson(value, 4);
    out += "\n\n";
  }
  return out;
}

std::string render_llama3(const ChatTemplate& tmpl, Messages messages, bool add_generation_prompt,
                          const std::vector<std::string>& tools) {
  const ChatTemplateKind kind = tmpl.kind;
  std::string out;
  size_t first = 0;
  if (kind == ChatTemplateKind::kLlama31) {
    // 3.1-3.3 always open with a system turn carrying the knowledge cutoff and a date; the
    // templates take the date from strftime_now or default to this one, which kiln always uses
    // so that a prompt does not depend on the day it is rendered.
    std::string system = tools.empty() ? "" : "Environment: ipython\n";
    system += "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n";
    if (leads_with_system(messages)) {
      system += py_strip(messages[0].content);
      first = 1;
    }
    append_llama3_turn(out, "system", system);
  }
  if (!tools.empty()) {
    // The template takes the next message as the user's, whatever its role.
    if (first == messages.size()) {
      fail("chat template {}: tools need a first user message to go in", chat_template_name(kind));
    }
    append_llama3_turn(out, "user",
                       llama_tools_preamble(tools) + py_strip(messages[first].content));
    ++first;
  }
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (tmpl.tool_calls == ToolCallFormat::kLlamaJson && !m.tool_calls.empty()) {
      const ChatToolCall& call = m.tool_calls[0];
      append_llama3_turn(
          out, "assistant",
          fmt::format("{{\"name\": \"{}\", \"{}\": {}}}", call.name,
                      tool_call_format_row(tmpl.tool_calls).arguments_key, call.arguments));
    } else if (m.role == "tool") {
      // A string is "iterable" to Jinja, so the template writes the content through tojson.
      append_llama3_turn(out, "ipython", jinja_tojson(nlohmann::ordered_json(m.content)));
    } else {
      append_llama3_turn(out, m.role, py_strip(m.content));
    }
  }
  if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

void append_chatml_turn(std::string& out, std::string_view role, std::string_view content) {
  out += "<|im_start|>";
  out += role;
  out += "\n";
  out += content;
  out += "<|im_end|>\n";
}

// The system turn when the request has tools: the system message and a blank line (Qwen 2.5:
// the default one when there is none; Qwen 3: none), then the tools, one JSON line each, and
// the instructions for calling them.
void append_tools_system_turn(std::string& out, const std::string* system,
                              const std::vector<std::string>& tools, bool doubled_braces) {
  out += "<|im_start|>system\n";
  if (system) out += *system + "\n\n";
  out +=
      "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
      "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
  for (const std::string& tool : tools) {
    out += "\n";
    out += tool;
  }
  out +=
      "\n</tools>\n\nFor each function call, return a json object with function name and "
      "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n";
  out += doubled_braces ? "{{" : "{";
  out += "\"name\": <function-name>, \"arguments\": <args-json-object>";
  out += doubled_braces ? "}}" : "}";
  out += "\n</tool_call><|im_end|>\n";
}

// Qwen's call, "<tool_call>\n{...}\n</tool_call>", with the markers of the template's format.
void append_tool_call(std::string& out, const ToolCallFormatRow& format, const ChatToolCall& call) {
  out += format.call_open();
  out += "\n{\"name\": \"";
  out += call.name;
  out += "\", \"";
  out += format.arguments_key;
  out += "\": ";
  out += call.arguments;
  out += "}\n";
  out += format.call_close();
}

void append_tool_calls_turn(std::string& out, const ToolCallFormatRow& format,
                            const ChatMessage& m) {
  out += "<|im_start|>assistant";
  if (!m.content.empty()) out += "\n" + m.content;
  for (const ChatToolCall& call : m.tool_calls) {
    out += "\n";
    append_tool_call(out, format, call);
  }
  out += "<|im_end|>\n";
}

// A tool result; consecutive ones share one user turn.
void append_tool_result(std::string& out, Messages messages, size_t i) {
  if (i == 0 || messages[i - 1].role != "tool") out += "<|im_start|>user";
  out += "\n<tool_response>\n" + messages[i].content + "\n</tool_response>";
  if (i + 1 == messages.size() || messages[i + 1].role != "tool") out += "<|im_end|>\n";
}

std::string render_chatml(const ChatTemplate& tmpl, Messages messages, bool add_generation_prompt,
                          const std::vector<std::string>& tools) {
  std::string out;
  size_t first = 0;
  if (!tools.empty()) {
    const std::string* system = &tmpl.default_system;
    if (leads_with_system(messages)) {
      system = &messages[0].content;
      first = 1;
    }
    append_tools_system_turn(out, system, tools,
                             tool_call_format_row(tmpl.tool_calls).doubled_example_braces);
  } else if (!tmpl.default_system.empty() && !leads_with_system(messages)) {
    append_chatml_turn(out, "system", tmpl.default_system);
  }
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (!m.tool_calls.empty()) {
      append_tool_calls_turn(out, tool_call_format_row(tmpl.tool_calls), m);
    } else if (m.role == "tool") {
      append_tool_result(out, messages, i);
    } else {
      append_chatml_turn(out, m.role, m.content);
    }
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

// Qwen 3: assistant turns after the last user query show their reasoning in <think> (an empty
// block for the final turn when there is none); earlier ones lose it. Tools as Qwen 2.5's, but
// no default system message, and calls follow the content on a new line only when there is
// content.
std::string render_qwen3(const ChatTemplate& tmpl, Messages messages, bool add_generation_prompt,
                         const std::vector<std::string>& tools) {
  const ToolCallFormatRow& format = tool_call_format_row(tmpl.tool_calls);
  size_t last_query = messages.size() - 1;
  for (size_t i = messages.size(); i-- > 0;) {
    const std::string& c = messages[i].content;
    const bool tool_response = c.starts_with("<tool_response>") && c.ends_with("</tool_response>");
    if (messages[i].role == "user" && !tool_response) {
      last_query = i;
      break;
    }
  }
  std::string out;
  size_t first = 0;
  if (!tools.empty()) {
    first = leads_with_system(messages) ? 1 : 0;
    append_tools_system_turn(out, first == 1 ? &messages[0].content : nullptr, tools,
                             format.doubled_example_braces);
  }
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "tool") {
      append_tool_result(out, messages, i);
      continue;
    }
    if (m.role != "assistant") {
      append_chatml_turn(out, m.role, m.content);
      continue;
    }
    std::string_view content = m.content;
    std::string_view reasoning;
    if (const size_t close = content.find("</think>"); close != std::string_view::npos) {
      reasoning = strip_newlines_right(content.substr(0, close));
      if (const size_t open = reasoning.rfind("<think>"); open != std::string_view::npos) {
        reasoning = reasoning.substr(open + 7);
      }
      reasoning = strip_newlines_left(reasoning);
      content = strip_newlines_left(content.substr(content.rfind("</think>") + 8));
    }
    out += "<|im_start|>assistant\n";
    if (i > last_query && (i + 1 == messages.size() || !reasoning.empty())) {
      out += "<think>\n";
      out += strip_newlines_right(strip_newlines_left(reasoning));
      out += "\n</think>\n\n";
      content = strip_newlines_left(content);
    }
    out += content;
    for (size_t k = 0; k < m.tool_calls.size(); ++k) {
      if (k > 0 || !content.empty()) out += "\n";
      append_tool_call(out, format, m.tool_calls[k]);
    }
    out += "<|im_end|>\n";
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

// v1, v3, v3-tekken: the system message is not a turn of its own but text in a user turn (v1:
// the first, v3: the last message, if that is a user turn; otherwise it is dropped, as there).
std::string render_mistral_inst(ChatTemplateKind kind, Messages messages) {
  const bool v1 = kind == ChatTemplateKind::kMistralV1;
  const bool v3 = kind == ChatTemplateKind::kMistralV3;
  const bool system = leads_with_system(messages);
  const size_t first = system ? 1 : 0;
  check_alternation(kind, messages, first);
  const std::string_view open = v1 ? " [INST] " : v3 ? "[INST] " : "[INST]";
  const std::string_view close = v1 ? " [/INST]" : "[/INST]";
  std::string out;
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user") {
      out += open;
      const bool here = v1 ? i == first : i + 1 == messages.size();
      if (system && here) out += messages[0].content + "\n\n";
      out += m.content;
      out += close;
    } else if (v1) {
      out += " " + m.content + "</s>";
    } else if (v3) {
      out.append(" ").append(py_strip(m.content)).append("</s>");
    } else {
      out += m.content + "</s>";
    }
  }
  return out;
}

// One tool as Mistral's [TOOL_CALLS] templates write it: only the tool's "function" object,
// each member but "return" as `"key": value`, where a string value goes in between quotes as it
// is (not escaped: a quote or newline in a description is written raw, as there) and any other
// value through tojson.
std::string mistral_tool(const std::string& tool) {
  const auto value = parse_ordered_json_bounded(tool);
  if (value.is_discarded() || !value.is_object() || !value.contains("function") ||
      !value["function"].is_object()) {
    fail("a tool definition is not a function object: {}", tool.substr(0, 64));
  }
  std::string out = "{\"type\": \"function\", \"function\": {";
  bool first = true;
  for (const auto& [key, val] : value["function"].items()) {
    if (key == "return") continue;
    if (!first) out += ", ";
    first = false;
    out += "\"" + key + "\": ";
    out += val.is_string() ? std::string("\"") + val.get<std::string>() + "\"" : jinja_tojson(val);
  }
  return out + "}}";
}

// Mistral Nemo's and Large 2407's templates with their tool format (kMistral): as
// render_mistral_inst, plus the tools before the last user message (every user message equal to
// it, as the template compares them by value), assistant calls and tool results. The
// alternation check skips tool results and assistant calls; a call turn drops its content.
std::string render_mistral_tools(const ChatTemplate& tmpl, Messages messages,
                                 const std::vector<std::string>& tools) {
  const std::string sp = tmpl.kind == ChatTemplateKind::kMistralV3 ? " " : "";
  const bool system = leads_with_system(messages);
  const size_t first = system ? 1 : 0;
  size_t turn = 0;
  const ChatMessage* last_user = nullptr;
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user") last_user = &m;
    if (m.role == "tool" || !m.tool_calls.empty()) continue;
    if ((m.role == "user") != (turn++ % 2 == 0)) {
      fail(
          "chat template {}: after an optional leading system message, roles must alternate "
          "user/assistant (tool calls and results aside) starting with user (message {} is '{}')",
          chat_template_name(tmpl.kind), i, m.role);
    }
  }
  std::string available;
  if (!tools.empty()) {
    available = "[AVAILABLE_TOOLS]" + sp + "[";
    for (size_t k = 0; k < tools.size(); ++k) {
      available += (k > 0 ? ", " : "") + mistral_tool(tools[k]);
    }
    available += "][/AVAILABLE_TOOLS]";
  }
  std::string out;
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "user") {
      // As the template's `message == user_messages | last`: equal messages, not the same one.
      if (!available.empty() && last_user != nullptr && m.content == last_user->content) {
        out += available;
      }
      out += "[INST]" + sp;
      if (system && i + 1 == messages.size()) out += messages[0].content + "\n\n";
      out += m.content + "[/INST]";
    } else if (!m.tool_calls.empty()) {
      // The template writes `function | tojson` without its closing brace, then the id.
      out.append(tool_call_format_row(tmpl.tool_calls).call_open()).append(sp).append("[");
      for (size_t k = 0; k < m.tool_calls.size(); ++k) {
        const ChatToolCall& c = m.tool_calls[k];
        if (k > 0) out += ", ";
        out += "{\"name\": " + jinja_tojson(c.name) + ", \"arguments\": " + c.arguments +
               ", \"id\": \"" + mistral_call_id(c.id) + "\"}";
      }
      out += "]</s>";
    } else if (m.role == "assistant") {
      out += sp.empty() ? m.content : std::string(" ") + py_strip(m.content);
      out += "</s>";
    } else if (m.role == "tool") {
      // The content goes in as it is, not as a JSON string (the template's `content|string`).
      out += "[TOOL_RESULTS]" + sp + "{\"content\": " + m.content + ", \"call_id\": \"" +
             mistral_call_id(m.tool_call_id) + "\"}[/TOOL_RESULTS]";
    } else {
      fail("chat template {} takes a system message only as the first message (message {})",
           chat_template_name(tmpl.kind), i);
    }
  }
  return out;
}

// v7, v7-tekken: system messages are [SYSTEM_PROMPT] blocks wherever they stand.
std::string render_mistral_v7(const ChatTemplate& tmpl, Messages messages) {
  const bool tekken = tmpl.kind == ChatTemplateKind::kMistralV7Tekken;
  const std::string_view space = tekken ? "" : " ";
  std::string out;
  size_t first = 0;
  if (tekken) {
    // The tekken templates put the leading (or default) system prompt first and then check that
    // the rest alternates, counting later system messages as non-user turns.
    std::string_view system = tmpl.default_system;
    if (leads_with_system(messages)) {
      system = messages[0].content;
      first = 1;
    }
    if (first == 1 || !system.empty()) {
      out += "[SYSTEM_PROMPT]" + std::string(system) + "[/SYSTEM_PROMPT]";
    }
    check_alternation(tmpl.kind, messages, first);
  }
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "system") {
      out += "[SYSTEM_PROMPT]" + std::string(space) + m.content + "[/SYSTEM_PROMPT]";
    } else if (m.role == "user") {
      out += "[INST]" + std::string(space) + m.content + "[/INST]";
    } else {
      out += std::string(space) + m.content + "</s>";
    }
  }
  return out;
}

std::string render_phi3(Messages messages, bool add_generation_prompt) {
  std::string out;
  for (const ChatMessage& m : messages) {
    if (m.role == "system" && m.content.empty()) continue;  // as Phi-3.5's template
    out += "<|" + m.role + "|>\n" + m.content + "<|end|>\n";
  }
  out += add_generation_prompt ? "<|assistant|>\n" : "<|endoftext|>";
  return out;
}

// Command-R's template: a leading system message as it is, then user/assistant turns stripped,
// alternating from the first message after it (the template raises otherwise; a system message
// later, which it would drop without a word, is refused).
std::string render_command_r(Messages messages, bool add_generation_prompt) {
  constexpr ChatTemplateKind kKind = ChatTemplateKind::kCommandR;
  const size_t first = leads_with_system(messages) ? 1 : 0;
  check_alternation(kKind, messages, first);
  refuse_system_after(kKind, messages, first);
  std::string out;
  if (first == 1) {
    out +=
        "<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>" + messages[0].content + "<|END_OF_TURN_TOKEN|>";
  }
  for (size_t i = first; i < messages.size(); ++i) {
    out += messages[i].role == "user" ? "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>"
                                      : "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>";
    out += py_strip(messages[i].content) + "<|END_OF_TURN_TOKEN|>";
  }
  if (add_generation_prompt) out += "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>";
  return out;
}

// DeepSeek-V2's template: every message in order, no checks (the eos token closes an assistant
// turn: DeepSeek-V2's vocabulary spells it with fullwidth bars and U+2581).
std::string render_deepseek_v2(Messages messages, bool add_generation_prompt) {
  std::string out;
  for (const ChatMessage& m : messages) {
    if (m.role == "user") {
      out += "User: " + m.content + "\n\n";
    } else if (m.role == "assistant") {
      out += "Assistant: " + m.content + "<｜end▁of▁sentence｜>";
    } else {
      out += m.content + "\n\n";
    }
  }
  if (add_generation_prompt) out += "Assistant:";
  return out;
}

}  // namespace

std::string chat_tools_refusal(const ChatTemplate& tmpl) {
  if (tmpl.takes_tools()) return {};
  return fmt::format(
      "the model's chat template ({}) has no tool-call format kiln renders{}; tools work with "
      "chatml and qwen3 templates that write Qwen's <tool_call> format, llama3.1 templates "
      "with Llama 3.1's JSON calls and mistral-v3/v3-tekken templates with Mistral's "
      "[TOOL_CALLS] JSON array (Mistral Nemo, Large 2407)",
      chat_template_name(tmpl.kind),
      tmpl.unsupported_tools.empty() ? "" : " (it writes " + tmpl.unsupported_tools + ")");
}

std::string apply_chat_template(const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages,
                                bool add_generation_prompt, const std::vector<std::string>& tools) {
  const ChatTemplateKind kind = tmpl.kind;
  KILN_CHECK(!messages.empty(), "chat template {}: no messages", chat_template_name(kind));
  if (!tools.empty() && !tmpl.takes_tools()) fail("{}", chat_tools_refusal(tmpl));
  check_roles(tmpl, messages);
  switch (kind) {
    case ChatTemplateKind::kGemma:
    case ChatTemplateKind::kGemma3:
      return render_gemma(kind, messages, add_generation_prompt);
    case ChatTemplateKind::kLlama3:
    case ChatTemplateKind::kLlama31:
      return render_llama3(tmpl, messages, add_generation_prompt, tools);
    case ChatTemplateKind::kChatML:
      return render_chatml(tmpl, messages, add_generation_prompt, tools);
    case ChatTemplateKind::kQwen3:
      return render_qwen3(tmpl, messages, add_generation_prompt, tools);
    // Mistral's templates end with [/INST] whatever add_generation_prompt says.
    case ChatTemplateKind::kMistralV1:
    case ChatTemplateKind::kMistralV3:
    case ChatTemplateKind::kMistralV3Tekken:
      if (tmpl.tool_calls == ToolCallFormat::kMistral) {
        return render_mistral_tools(tmpl, messages, tools);
      }
      return render_mistral_inst(kind, messages);
    case ChatTemplateKind::kMistralV7:
    case ChatTemplateKind::kMistralV7Tekken:
      return render_mistral_v7(tmpl, messages);
    case ChatTemplateKind::kPhi3:
      return render_phi3(messages, add_generation_prompt);
    case ChatTemplateKind::kCommandR:
      return render_command_r(messages, add_generation_prompt);
    case ChatTemplateKind::kDeepSeekV2:
      return render_deepseek_v2(messages, add_generation_prompt);
  }
  fail("unknown chat template kind {}", static_cast<int>(kind));
}

}  // namespace kiln::model
