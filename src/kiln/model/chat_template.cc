#include "kiln/model/chat_template.h"

#include "kiln/base/error.h"
#include "kiln/model/tokenizer.h"

namespace kiln::model {
namespace {

// Jinja's |trim: leading and trailing whitespace removed.
std::string_view trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\n\r\f\v";
  const size_t begin = s.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return {};
  const size_t end = s.find_last_not_of(kSpace);
  return s.substr(begin, end - begin + 1);
}

void check_role(ChatTemplateKind kind, size_t index, const std::string& role,
                std::initializer_list<std::string_view> allowed) {
  for (std::string_view r : allowed) {
    if (role == r) return;
  }
  std::string list;
  for (std::string_view r : allowed) list += (list.empty() ? "" : ", ") + std::string(r);
  fail("chat template {} cannot take role '{}' (message {}); allowed roles: {}",
       chat_template_name(kind), role, index, list);
}

std::string render_gemma(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  std::string out;
  std::string system_prefix;
  size_t first = 0;
  if (messages[0].role == "system") {
    system_prefix = std::string(trim(messages[0].content)) + "\n\n";
    first = 1;
  }
  bool prefix_pending = !system_prefix.empty();
  for (size_t i = first; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    if (m.role == "system") {
      fail("chat template gemma takes a system message only as the first message (message {})", i);
    }
    check_role(ChatTemplateKind::kGemma, i, m.role, {"user", "assistant", "model"});
    const bool model = m.role != "user";
    out += "<start_of_turn>";
    out += model ? "model" : "user";
    out += "\n";
    if (prefix_pending && !model) {
      out += system_prefix;
      prefix_pending = false;
    }
    out += trim(m.content);
    out += "<end_of_turn>\n";
  }
  // A system message with no user turn after it still reaches the model.
  if (prefix_pending) {
    out += "<start_of_turn>user\n" + system_prefix.substr(0, system_prefix.size() - 2) +
           "<end_of_turn>\n";
  }
  if (add_generation_prompt) out += "<start_of_turn>model\n";
  return out;
}

std::string render_llama3(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    check_role(ChatTemplateKind::kLlama3, i, m.role, {"system", "user", "assistant", "ipython"});
    out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n";
    out += trim(m.content);
    out += "<|eot_id|>";
  }
  if (add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

std::string render_chatml(const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    check_role(ChatTemplateKind::kChatML, i, m.role, {"system", "user", "assistant", "tool"});
    out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  }
  if (add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

}  // namespace

std::string_view chat_template_name(ChatTemplateKind kind) {
  switch (kind) {
    case ChatTemplateKind::kGemma:
      return "gemma";
    case ChatTemplateKind::kLlama3:
      return "llama3";
    case ChatTemplateKind::kChatML:
      return "chatml";
  }
  return "unknown";
}

ChatTemplateKind detect_chat_template(std::string_view jinja, std::string_view architecture,
                                      const Tokenizer* tokenizer) {
  if (jinja.find("<start_of_turn>") != std::string_view::npos) return ChatTemplateKind::kGemma;
  if (jinja.find("<|start_header_id|>") != std::string_view::npos) {
    return ChatTemplateKind::kLlama3;
  }
  if (jinja.find("<|im_start|>") != std::string_view::npos) return ChatTemplateKind::kChatML;
  if (architecture.substr(0, 5) == "gemma") return ChatTemplateKind::kGemma;
  if (architecture == "llama" && tokenizer != nullptr &&
      tokenizer->find_token("<|start_header_id|>").has_value()) {
    return ChatTemplateKind::kLlama3;
  }
  return ChatTemplateKind::kChatML;
}

std::string apply_chat_template(ChatTemplateKind kind, const std::vector<ChatMessage>& messages,
                                bool add_generation_prompt) {
  KILN_CHECK(!messages.empty(), "chat template {}: no messages", chat_template_name(kind));
  switch (kind) {
    case ChatTemplateKind::kGemma:
      return render_gemma(messages, add_generation_prompt);
    case ChatTemplateKind::kLlama3:
      return render_llama3(messages, add_generation_prompt);
    case ChatTemplateKind::kChatML:
      return render_chatml(messages, add_generation_prompt);
  }
  fail("unknown chat template kind {}", static_cast<int>(kind));
}

}  // namespace kiln::model
