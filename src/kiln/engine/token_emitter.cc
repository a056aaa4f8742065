#include "kiln/engine/token_emitter.h"

#include <exception>
#include <string>
#include <utility>

#include "kiln/base/error.h"
#include "kiln/base/log.h"

namespace kiln::engine {

namespace {

// The constraint refused a token its own mask allowed: a bug, reported as such rather than as
// a sampling failure.
class ConstraintBroken : public std::exception {
 public:
  explicit ConstraintBroken(int32_t token)
      : what_(fmt::format("internal error: token {} broke the JSON constraint", token)) {}
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  std::string what_;
};

}  // namespace

void TokenEmitter::constrain(const Sequence& seq, std::span<float> logits) {
  const std::shared_ptr<const TokenMask> mask =
      masks_->mask(seq.json.matcher(), seq.json.end_ids());
  KILN_CHECK(mask->allowed_count() > 0,
             "the JSON constraint allows no token of this vocabulary here");
  mask->apply(logits);
}

EmittedTokens TokenEmitter::take_tokens(Sequence& seq, StepOutput& out, bool greedy,
                                        int64_t first_row, std::span<const int32_t> proposals,
                                        RequestEvent& ev) {
  EmittedTokens result;
  const auto n_rows = static_cast<int64_t>(proposals.size()) + 1;
  try {
    for (int64_t j = 0; j < n_rows; ++j) {
      const bool has_proposal = j < static_cast<int64_t>(proposals.size());
      const int32_t proposal = has_proposal ? proposals[static_cast<size_t>(j)] : -1;
      int32_t token = 0;
      bool accept = false;
      // 1. constraint, 2. sample (or accept the proposal)
      if (greedy) {
        token = out.greedy_ids[static_cast<size_t>(first_row + j)];
        accept = has_proposal && token == proposal;
      } else {
        std::span<float> logits(out.logits.data() + (first_row + j) * vocab_,
                                static_cast<size_t>(vocab_));
        if (seq.json.open()) constrain(seq, logits);
        TokenLogprob lp;
        TokenLogprob* want_lp = seq.request.logprobs >= 0 ? &lp : nullptr;
        token = has_proposal ? seq.sampler.sample_or_accept(logits, proposal, &accept,
                                                            seq.stop.banned_ids(), want_lp)
                             : seq.sampler.sample(logits, seq.stop.banned_ids(), want_lp);
        if (want_lp != nullptr) ev.logprobs.push_back(std::move(lp));
      }
      KILN_CHECK(token >= 0 && token < vocab_, "the executor returned token id {}", token);
      // 3. the constraint follows the token (the mask allowed it: a refusal is a bug)
      if (!seq.json.feed(token, *tokenizer_)) throw ConstraintBroken(token);
      // 4. the request's history
      seq.tokens.push_back(token);
      seq.sampler.add_output(token);
      ++result.emitted;
      // 5. stop conditions, and the text the client may see
      StopUpdate u = seq.stop.on_token(token);
      ev.new_tokens.push_back(token);
      ev.text_delta += u.text_delta;
      if (u.finished) {
        ev.finish_reason = u.reason;
        ev.matched_stop = std::move(u.matched_stop);
        ev.matched_stop_token = u.matched_stop_token;
        result.finished = true;
        break;
      }
      if (!accept) break;
      ++result.accepted;
    }
  } catch (const std::exception& e) {
    RequestEvent abort;
    abort.prompt_logprobs = std::move(ev.prompt_logprobs);
    abort.finish_reason = FinishReason::Abort;
    abort.error = dynamic_cast<const ConstraintBroken*>(&e) != nullptr
                      ? std::string(e.what())
                      : std::string("sampling failed: ") + e.what();
    ev = std::move(abort);
    result.failed = true;
  }
  return result;
}

void TokenEmitter::deliver(Sequence& seq, RequestEvent& ev, bool speculating) {
  // 6. emit
  ev.request_id = seq.id;
  ev.prompt_tokens = static_cast<int>(seq.n_prompt);
  ev.completion_tokens = static_cast<int>(seq.generated());
  ev.cached_tokens = std::max(seq.cached_tokens, 0);
  if (speculating) {
    ev.spec_verify_ct = seq.spec.verify_ct;
    ev.spec_proposed = seq.spec.proposed;
    ev.spec_accepted = seq.spec.accepted;
  }
  if (!seq.on_event) return;
  try {
    seq.on_event(ev);
  } catch (const std::exception& e) {
    KILN_LOG_ERROR("request {}: event callback threw: {}", seq.id, e.what());
  } catch (...) {
    KILN_LOG_ERROR("request {}: event callback threw", seq.id);
  }
}

}  // namespace kiln::engine
