// What the engine needs from a tokenizer: detokenization and the end-of-generation test.
// A small interface so the scheduler and the stop checker can be tested with a fake
// vocabulary; model::Tokenizer is adapted to it (tokenizer_text.h).
#pragma once
#include <cstdint>
#include <span>
#include <string>

namespace kiln::engine {

class TokenText {
 public:
  virtual ~TokenText() = default;
  // The text of a token sequence (decoding a sequence, not concatenating pieces, so that
  // byte-fallback tokens combine into UTF-8 characters). Incomplete UTF-8 at the end may come
  // out as bytes or as U+FFFD; IncrementalText holds either back.
  virtual std::string decode(std::span<const int32_t> ids, bool skip_special) const = 0;
  virtual bool is_end_of_generation(int32_t id) const = 0;
  virtual int64_t vocab_size() const = 0;
};

}  // namespace kiln::engine
