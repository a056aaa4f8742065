// Built-in chat formats. kiln does not run Jinja: it recognizes which family a model's
// tokenizer.chat_template belongs to and renders that family's format itself.
//
//  Gemma:   <start_of_turn>user\n{content}<end_of_turn>\n ... <start_of_turn>model\n
//           ("assistant" is written "model"; a leading system message is prepended to the first
//           user turn followed by "\n\n", as Gemma 3's own template does; contents are trimmed)
//  Llama 3: <|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|> ...
//           <|start_header_id|>assistant<|end_header_id|>\n\n   (contents are trimmed)
//  ChatML:  <|im_start|>{role}\n{content}<|im_end|>\n ... <|im_start|>assistant\n
//
// The output never contains BOS: encode the prompt with add_special = true (and parse_special =
// true so that the turn markers become their control tokens).
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace kiln::model {

class Tokenizer;

enum class ChatTemplateKind { kGemma, kLlama3, kChatML };

struct ChatMessage {
  std::string role;  // "system", "user", "assistant" (Llama 3 also "ipython", ChatML also "tool")
  std::string content;
};

std::string_view chat_template_name(ChatTemplateKind kind);

// From the model's Jinja template (tokenizer.chat_template; may be empty) by the turn markers it
// uses; without a recognizable template: Gemma for gemma* architectures, Llama 3 for llama when
// the vocab has <|start_header_id|>, otherwise ChatML. `tokenizer` may be null.
ChatTemplateKind detect_chat_template(std::string_view jinja_template_or_empty,
                                      std::string_view architecture,
                                      const Tokenizer* tokenizer = nullptr);

// Throws kiln::Error for a role the format cannot express, a Gemma system message that is not
// the first message, or an empty message list.
std::string apply_chat_template(ChatTemplateKind kind, const std::vector<ChatMessage>& messages,
                                bool add_generation_prompt);

}  // namespace kiln::model
