// The model's tokenizer and chat template as the HTTP server's TextCodec: what `kiln serve`
// hands the server, and what any embedding of the server with a real model would.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/model/chat_template.h"
#include "kiln/model/tokenizer.h"
#include "kiln/server/backend.h"

namespace kiln::server {

// The chat format read from the model's template, or why there is none. A model kiln cannot
// format chat for is still served: completions work, chat requests get that reason as a 400.
struct ChatSupport {
  std::optional<model::ChatTemplate> chat_template;
  std::string unavailable_reason;
  std::string source;  // the template's Jinja text as the model file gives it

  static ChatSupport from_template(std::string_view jinja);
};

class TokenizerCodec final : public TextCodec {
 public:
  TokenizerCodec(const model::Tokenizer& tokenizer, ChatSupport chat);

  // Control-token text in a prompt ("<start_of_turn>") becomes the token, as Hugging Face
  // tokenizers (and so SGLang) and `kiln run` do.
  std::vector<int32_t> encode(std::string_view text, bool add_special) const override;
  std::string decode(const std::vector<int32_t>& ids, bool skip_special) const override;
  // Throws kiln::Error (the routes answer it with 400 invalid_request_error and its message)
  // when the model has no chat format.
  std::string render_chat(const std::vector<ChatMessage>& messages,
                          const std::vector<std::string>& tools) const override;
  std::string tools_refusal() const override;
  ToolCallFormat tool_call_format() const override;
  int64_t vocab_size() const override { return tokenizer_.vocab_size(); }
  size_t max_token_bytes() const override { return max_token_bytes_; }
  Specials specials() const override;

 private:
  const model::Tokenizer& tokenizer_;
  ChatSupport chat_;
  size_t max_token_bytes_;
};

}  // namespace kiln::server
