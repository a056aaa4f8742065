// Streams the text of a growing token sequence without ever emitting half a UTF-8 character
// or text that a later token would change. Each push decodes a short window: the tokens of
// the previous delta (as context, so that tokenizers that treat the first token specially or
// merge bytes across tokens decode correctly) plus the tokens not yet emitted; the new text is
// whatever the window adds beyond the context, released once it does not end in an incomplete
// UTF-8 sequence or U+FFFD.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/engine/token_text.h"

namespace kiln::engine {

class IncrementalText {
 public:
  IncrementalText(const TokenText& tokenizer, bool skip_special)
      : tokenizer_(&tokenizer), skip_special_(skip_special) {}

  // Appends a token; returns the text that became final (possibly empty).
  std::string push(int32_t token);
  // Returns whatever is still held back (an incomplete character at the end of generation).
  std::string flush();

 private:
  std::string decode(size_t begin, size_t end) const;

  const TokenText* tokenizer_;
  bool skip_special_;
  std::vector<int32_t> ids_;
  size_t prefix_ = 0;  // start of the context window
  size_t read_ = 0;    // tokens before this have been emitted
};

// True when s ends inside a UTF-8 sequence (a lead byte whose continuation bytes are missing)
// or with U+FFFD (what some decoders emit for an unfinished byte sequence).
bool ends_with_incomplete_utf8(const std::string& s);

}  // namespace kiln::engine
