// The model's tokenizer and chat template as the HTTP server's TextCodec.
#pragma once
#include "kiln/model/chat_template.h"
#include "kiln/model/tokenizer.h"
#include "kiln/server/backend.h"

namespace kiln::cli {

class TokenizerCodec final : public server::TextCodec {
 public:
  TokenizerCodec(const model::Tokenizer& tokenizer, model::ChatTemplateKind chat_kind)
      : tokenizer_(tokenizer), chat_kind_(chat_kind) {}

  // Control-token text in a prompt ("<start_of_turn>") becomes the token, as Hugging Face
  // tokenizers (and so SGLang) and `kiln run` do.
  std::vector<int32_t> encode(std::string_view text, bool add_special) const override {
    return tokenizer_.encode(text, add_special, /*parse_special=*/true);
  }
  std::string decode(const std::vector<int32_t>& ids, bool skip_special) const override {
    return tokenizer_.decode(ids, skip_special);
  }
  std::vector<int32_t> encode_chat(const std::vector<server::ChatTurn>& turns) const override {
    std::vector<model::ChatMessage> messages;
    messages.reserve(turns.size());
    for (const auto& t : turns) messages.push_back({t.role, t.content});
    return encode(model::apply_chat_template(chat_kind_, messages, /*add_generation_prompt=*/true),
                  /*add_special=*/true);
  }
  int64_t vocab_size() const override { return tokenizer_.vocab_size(); }

 private:
  const model::Tokenizer& tokenizer_;
  model::ChatTemplateKind chat_kind_;
};

}  // namespace kiln::cli
