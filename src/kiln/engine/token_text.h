// What the engine needs from a tokenizer: streaming detokenization and the end-of-generation
// test. A small interface so the scheduler and the stop checker can be tested with a fake
// vocabulary; model::Tokenizer is adapted to it (tokenizer_text.h).
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

namespace kiln::engine {

// Detokenizes generated tokens one at a time, UTF-8 safe.
class TextStream {
 public:
  virtual ~TextStream() = default;
  // The text that became final with this token (possibly empty).
  virtual std::string push(int32_t token) = 0;
  // End of generation: whatever is still held back (an unfinished character).
  virtual std::string finish() = 0;
};

class TokenText {
 public:
  virtual ~TokenText() = default;
  // The text of a token sequence (decoding a sequence, not concatenating pieces, so that
  // byte-fallback tokens combine into UTF-8 characters).
  virtual std::string decode(std::span<const int32_t> ids, bool skip_special) const = 0;
  virtual bool is_end_of_generation(int32_t id) const = 0;
  virtual int64_t vocab_size() const = 0;
  // A stream for tokens that continue a prompt (so a leading space is real text): the bytes of
  // append_token_text, released as whole UTF-8 characters by model::IncrementalDecoder, the
  // one streaming detokenizer (an unfinished character at the end comes out as U+FFFD).
  std::unique_ptr<TextStream> stream(bool skip_special) const;
  // Appends the bytes token `id` adds to generated text, possibly part of a UTF-8 character
  // (nothing for a special token when skip_special). The default decodes the token alone,
  // which is right for vocabularies whose decode() concatenates raw token bytes.
  virtual void append_token_text(int32_t id, bool skip_special, std::string& out) const {
    const int32_t one[] = {id};
    out += decode(one, skip_special);
  }
  // The bytes token `id` adds to generated text (possibly part of a UTF-8 character, as for a
  // byte-fallback token), or nullopt for a token that adds none of its own (control tokens):
  // what constrained decoding matches against. The default decodes the token alone, which is
  // right for vocabularies whose decode() concatenates raw token bytes.
  virtual std::optional<std::string> token_bytes(int32_t id) const {
    const int32_t one[] = {id};
    std::string s = decode(one, /*skip_special=*/true);
    if (s.empty()) return std::nullopt;
    return s;
  }
};

}  // namespace kiln::engine
