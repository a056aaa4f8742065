// Runs a freshly loaded tokenizer over text that reaches its branches: spaces and newlines in
// runs, digits, punctuation, multi-byte and ill-formed UTF-8, and control-token lookalikes.
#pragma once
#include <string_view>
#include <vector>

#include "kiln/model/tokenizer.h"

namespace kiln::fuzz {

inline void exercise_tokenizer(const model::Tokenizer& tok) {
  static constexpr std::string_view kSample =
      "Hello  world!\n\n\tIt's 12345 caf\xc3\xa9 \xe2\x96\x81x \xf0\x9f\x98\x80 \xff\xc3 "
      "<s></s><|im_start|>user<|im_end|><start_of_turn><unk> a ab  ";
  for (bool special : {false, true}) {
    std::vector<int32_t> ids = tok.encode(kSample, special, special);
    tok.decode(ids, special);
  }
  // Every token's own bytes, up to a bound that keeps an execution short.
  const int32_t n = std::min<int32_t>(tok.vocab_size(), 4096);
  std::vector<int32_t> all;
  for (int32_t id = 0; id < n; ++id) all.push_back(id);
  tok.decode(all, false);
  tok.decode(all, true);
}

}  // namespace kiln::fuzz
