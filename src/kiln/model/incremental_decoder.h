// Streaming detokenization, the one implementation kiln has (the engine's TextStream wraps it,
// engine/token_text.cc): fed one generated id at a time, returns only whole UTF-8 characters.
// Bytes of a character split across tokens (byte-fallback <0xXX> pieces, byte-level BPE tokens)
// are held back until the character is complete. Everything push() and finish() return,
// concatenated, equals Tokenizer::decode() of all the ids with the same skip_special.
// Stop strings are not its business: engine::StopChecker holds back text that may begin one.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

#include "kiln/model/tokenizer.h"

namespace kiln::model {

class IncrementalDecoder {
 public:
  // Appends the bytes token `id` adds to the text to `out` (nothing for a skipped token).
  using AppendToken = std::function<void(int32_t id, std::string& out)>;

  // at_text_start: the ids begin a text, so the vocab's space-prefix rule applies to the first
  // visible token exactly as decode() applies it. Pass false to continue after a prompt, where a
  // leading space is real.
  IncrementalDecoder(const Tokenizer& tokenizer, bool skip_special, bool at_text_start = true);
  // A vocabulary known only by the bytes each token adds (the engine's TokenText): the same
  // hold-back, no space-prefix rule (its text continues a prompt).
  explicit IncrementalDecoder(AppendToken append_token);

  // The text that became complete with this token (possibly empty). Throws kiln::Error for an
  // id outside the vocabulary.
  std::string push(int32_t id);
  // End of stream: held-back bytes of an unfinished character, as U+FFFD.
  std::string finish();
  // Bytes held back waiting for the rest of a character.
  size_t pending_bytes() const { return pending_.size(); }

 private:
  AppendToken append_token_;
  // The tokenizer whose space-prefix rule applies to the first visible token; null: none.
  const Tokenizer* text_start_ = nullptr;
  std::string pending_;
};

}  // namespace kiln::model
