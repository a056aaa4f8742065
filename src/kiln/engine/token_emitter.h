// What a step's output rows do to one request, in one order for plain decode rows and verify
// rows alike: for each row, mask the logits with the JSON constraint, sample (or, for a verify
// row, accept or replace its proposal), feed the token to the constraint, push it onto the
// request's tokens and sampler history, run the stop checker, and add it to the event; then
// deliver the event to the request's callback.
//
// Verify rows (speculative decoding): row j holds input token j (the last accepted token, then
// proposal j - 1) and its output is the model's token after it. Greedy: proposal j is accepted
// when it equals the model's token after row j. Sampled: the speculative sampling rule decides
// (Sampler::sample_or_accept), each row's distribution after the tokens accepted before it
// (penalties, banned ids, the JSON constraint). Only past an accepted proposal is row j + 1's
// output one that plain decoding would reach, so the rows stop at the first rejection.
#pragma once
#include <cstdint>
#include <span>

#include "kiln/engine/constraint_masks.h"
#include "kiln/engine/request.h"
#include "kiln/engine/sequence.h"
#include "kiln/engine/step_batch.h"
#include "kiln/engine/token_text.h"

namespace kiln::engine {

// What take_tokens did.
struct EmittedTokens {
  int64_t emitted = 0;    // tokens pushed onto the request (and into the event)
  int64_t accepted = 0;   // proposals among them
  bool finished = false;  // the stop checker ended the request (reason in the event)
  bool failed = false;    // sampling failed: the event is an abort carrying the error
};

class TokenEmitter {
 public:
  // `masks` holds the constraint's masks (the step's rows prefetched); `vocab`: a logits row's
  // width.
  TokenEmitter(ConstraintMasks& masks, const TokenText& tokenizer, int64_t vocab)
      : masks_(&masks), tokenizer_(&tokenizer), vocab_(vocab) {}

  // Takes the request's tokens from rows first_row.. of `out`: one row per proposal plus one
  // (a plain row when `proposals` is empty), stopping after the first rejected proposal or
  // when the request stops. `greedy`: the rows are out.greedy_ids, else logits rows (which
  // masking and sampling modify in place). Adds the tokens, their text and logprobs to `ev`;
  // on failure `ev` becomes an abort (tokens pushed before the failure stay on the request,
  // the event carries none of them; prompt logprobs it carried stay).
  EmittedTokens take_tokens(Sequence& seq, StepOutput& out, bool greedy, int64_t first_row,
                            std::span<const int32_t> proposals, RequestEvent& ev);

  // Delivers `ev` to the request's callback, with the request's id and counts filled in (and
  // the speculation counts when `speculating`). A callback that throws is logged, not
  // propagated: a failing consumer must not take the scheduler down with it.
  static void deliver(Sequence& seq, RequestEvent& ev, bool speculating);

 private:
  // Sets the logits of every token the constraint refuses to -inf; throws kiln::Error when it
  // allows none.
  void constrain(const Sequence& seq, std::span<float> logits);

  ConstraintMasks* masks_;
  const TokenText* tokenizer_;
  int64_t vocab_;
};

}  // namespace kiln::engine
