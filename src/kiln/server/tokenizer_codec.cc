#include "kiln/server/tokenizer_codec.h"

#include <algorithm>
#include <utility>

#include "kiln/base/error.h"

namespace kiln::server {
namespace {

// The most prompt bytes one token can cover. The text a token matches is never longer than
// its piece (SentencePiece writes a 1-byte space as the 3-byte U+2581, byte-level BPE a byte
// as a 1- or 2-byte character; a control token matches exactly its piece) or than its
// decoded bytes; text no piece covers becomes one byte-fallback or unknown token per
// character (at most 4 bytes). Nothing is dropped before tokenization, so this bounds it.
size_t longest_token(const model::Tokenizer& t) {
  size_t most = 4;
  for (int32_t id = 0; id < t.vocab_size(); ++id) {
    most = std::max({most, t.piece(id).size(), t.token_bytes(id).size()});
  }
  return most;
}

}  // namespace

ChatSupport ChatSupport::from_template(std::string_view jinja) {
  try {
    return {model::detect_chat_template(jinja), {}, std::string(jinja)};
  } catch (const Error& e) {
    return {std::nullopt, e.what(), std::string(jinja)};
  }
}

TokenizerCodec::TokenizerCodec(const model::Tokenizer& tokenizer, ChatSupport chat)
    : tokenizer_(tokenizer), chat_(std::move(chat)), max_token_bytes_(longest_token(tokenizer)) {}

std::vector<int32_t> TokenizerCodec::encode(std::string_view text, bool add_special) const {
  return tokenizer_.encode(text, add_special, /*parse_special=*/true);
}

std::string TokenizerCodec::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  return tokenizer_.decode(ids, skip_special);
}

std::string TokenizerCodec::render_chat(const std::vector<ChatMessage>& messages,
                                        const std::vector<std::string>& tools) const {
  if (!chat_.chat_template)
    fail("chat is unavailable for this model: {}", chat_.unavailable_reason);
  return model::apply_chat_template(*chat_.chat_template, messages,
                                    /*add_generation_prompt=*/true, tools);
}

std::string TokenizerCodec::tools_refusal() const {
  if (!chat_.chat_template)
    return "chat is unavailable for this model: " + chat_.unavailable_reason;
  return model::chat_tools_refusal(*chat_.chat_template);
}

ToolCallFormat TokenizerCodec::tool_call_format() const {
  return chat_.chat_template ? chat_.chat_template->tool_calls : ToolCallFormat::kNone;
}

TextCodec::Specials TokenizerCodec::specials() const {
  auto text = [&](int32_t id) {
    return id >= 0 ? std::string(tokenizer_.piece(id)) : std::string();
  };
  return {text(tokenizer_.bos()), text(tokenizer_.eos()), text(tokenizer_.pad()), chat_.source};
}

}  // namespace kiln::server
