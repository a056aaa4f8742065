// The model's tokenizer and chat template as the HTTP server's TextCodec.
#pragma once
#include <algorithm>
#include <optional>
#include <string>

#include "kiln/base/error.h"
#include "kiln/model/chat_template.h"
#include "kiln/model/tokenizer.h"
#include "kiln/server/backend.h"

namespace kiln::cli {

// The chat format read from the model's template, or why there is none. A model kiln cannot
// format chat for is still served: completions work, chat requests get that reason as a 400.
struct ChatSupport {
  std::optional<model::ChatTemplate> chat_template;
  std::string unavailable_reason;
  std::string source;  // the template's Jinja text as the model file gives it

  static ChatSupport from_template(std::string_view jinja) {
    try {
      return {model::detect_chat_template(jinja), {}, std::string(jinja)};
    } catch (const Error& e) {
      return {std::nullopt, e.what(), std::string(jinja)};
    }
  }
};

class TokenizerCodec final : public server::TextCodec {
 public:
  TokenizerCodec(const model::Tokenizer& tokenizer, ChatSupport chat)
      : tokenizer_(tokenizer), chat_(std::move(chat)), max_token_bytes_(longest_token(tokenizer)) {}

  // Control-token text in a prompt ("<start_of_turn>") becomes the token, as Hugging Face
  // tokenizers (and so SGLang) and `kiln run` do.
  std::vector<int32_t> encode(std::string_view text, bool add_special) const override {
    return tokenizer_.encode(text, add_special, /*parse_special=*/true);
  }
  std::string decode(const std::vector<int32_t>& ids, bool skip_special) const override {
    return tokenizer_.decode(ids, skip_special);
  }
  std::string render_chat(const std::vector<server::ChatTurn>& turns,
                          const std::vector<std::string>& tools) const override {
    // kiln::Error: the routes answer it with 400 invalid_request_error and this message.
    if (!chat_.chat_template)
      fail("chat is unavailable for this model: {}", chat_.unavailable_reason);
    std::vector<model::ChatMessage> messages;
    messages.reserve(turns.size());
    for (const auto& t : turns) {
      model::ChatMessage m{t.role, t.content};
      for (const auto& c : t.tool_calls) m.tool_calls.push_back({c.name, c.arguments, c.id});
      m.tool_call_id = t.tool_call_id;
      messages.push_back(std::move(m));
    }
    return model::apply_chat_template(*chat_.chat_template, messages,
                                      /*add_generation_prompt=*/true, tools);
  }
  std::string tools_refusal() const override {
    if (!chat_.chat_template)
      return "chat is unavailable for this model: " + chat_.unavailable_reason;
    return model::chat_tools_refusal(*chat_.chat_template);
  }
  server::ToolCallFormat tool_call_format() const override {
    if (!chat_.chat_template) return server::ToolCallFormat::kNone;
    if (chat_.chat_template->hermes_tools) {
      return chat_.chat_template->hermes_doubled_braces ? server::ToolCallFormat::kHermesFenced
                                                        : server::ToolCallFormat::kHermes;
    }
    if (chat_.chat_template->llama_json_tools) return server::ToolCallFormat::kLlamaJson;
    if (chat_.chat_template->mistral_tools) return server::ToolCallFormat::kMistral;
    return server::ToolCallFormat::kNone;
  }
  int64_t vocab_size() const override { return tokenizer_.vocab_size(); }
  size_t max_token_bytes() const override { return max_token_bytes_; }
  Specials specials() const override {
    auto text = [&](int32_t id) {
      return id >= 0 ? std::string(tokenizer_.piece(id)) : std::string();
    };
    return {text(tokenizer_.bos()), text(tokenizer_.eos()), text(tokenizer_.pad()), chat_.source};
  }

 private:
  // The most prompt bytes one token can cover. The text a token matches is never longer than
  // its piece (SentencePiece writes a 1-byte space as the 3-byte U+2581, byte-level BPE a byte
  // as a 1- or 2-byte character; a control token matches exactly its piece) or than its
  // decoded bytes; text no piece covers becomes one byte-fallback or unknown token per
  // character (at most 4 bytes). Nothing is dropped before tokenization, so this bounds it.
  static size_t longest_token(const model::Tokenizer& t) {
    size_t most = 4;
    for (int32_t id = 0; id < t.vocab_size(); ++id) {
      most = std::max({most, t.piece(id).size(), t.token_bytes(id).size()});
    }
    return most;
  }

  const model::Tokenizer& tokenizer_;
  ChatSupport chat_;
  size_t max_token_bytes_;
};

}  // namespace kiln::cli
