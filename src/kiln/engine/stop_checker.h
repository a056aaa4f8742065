// Decides when a request stops and what text reaches the client, one generated token at a
// time: stop token ids, end-of-generation tokens (unless ignore_eos), max_new_tokens,
// min_new_tokens (no stop of any kind before it; the sampler is told to ban EOS and stop ids
// meanwhile) and stop strings matched on the detokenized output, including matches that span
// several tokens.
//
// Streaming rule: text that might be the beginning of a stop string is held back (the longest
// suffix of the pending text that is a prefix of some stop string), so the client never sees
// part of a stop string; on a match the text is cut right before it. The text of a stop token
// (EOS or a stop id) is never emitted.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kiln/engine/request.h"
#include "kiln/engine/token_text.h"

namespace kiln::engine {

struct StopUpdate {
  std::string text_delta;  // text to stream now
  bool finished = false;
  FinishReason reason = FinishReason::None;
  std::string matched_stop;
  int32_t matched_stop_token = -1;
};

class StopChecker {
 public:
  // eog_ids: every end-of-generation token id of the vocabulary (banned before
  // min_new_tokens unless ignore_eos). Throws kiln::Error for invalid conditions.
  StopChecker(const StopConditions& stop, const TokenText& tokenizer, bool skip_special,
              std::span<const int32_t> eog_ids);

  // Token ids the sampler must not choose for the next token (empty once min_new_tokens
  // tokens have been generated).
  std::span<const int32_t> banned_ids() const;
  // Feeds the next generated token.
  StopUpdate on_token(int32_t token);
  int generated() const { return generated_; }

 private:
  bool is_stop_token(int32_t token) const;
  // Finds the earliest stop string in pending_; on a match fills `u` and returns true.
  bool match_stop_string(StopUpdate& u);
  size_t held_back_length() const;

  StopConditions stop_;
  const TokenText* tokenizer_;
  std::unique_ptr<TextStream> text_;
  std::vector<int32_t> banned_;  // EOS + stop ids, while below min_new_tokens
  std::string pending_;          // decoded text not yet streamed
  int generated_ = 0;
};

// Checks StopConditions (max >= 0, min in [0, max], no empty stop string); throws kiln::Error.
void validate(const StopConditions& stop);

}  // namespace kiln::engine
