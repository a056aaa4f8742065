#include "kiln/engine/request_limits.h"

#include "kiln/base/error.h"
#include "kiln/engine/stop_checker.h"

namespace kiln::engine {

void validate(const GenerateRequest& r, const RequestLimits& limits) {
  KILN_CHECK(!r.prompt_ids.empty(), "the prompt is empty");
  for (int32_t t : r.prompt_ids)
    KILN_CHECK(t >= 0 && t < limits.vocab, "prompt token id {} is outside the vocabulary [0, {})",
               t, limits.vocab);
  engine::validate(r.sampling);
  for (const auto& [t, bias] : r.sampling.logit_bias) {
    KILN_CHECK(t < limits.vocab, "logit_bias token id {} is outside the vocabulary [0, {})", t,
               limits.vocab);
  }
  engine::validate(r.stop);
  KILN_CHECK(!(r.sampling.json_schema && r.sampling.grammar),
             "a request takes one constraint: a JSON schema or a grammar, not both");
  if ((r.sampling.json_schema && r.sampling.json_after.empty()) || r.sampling.grammar) {
    // The constraint allows end of sequence only once the value is complete, and then nothing
    // else: a request that must not stop there could never finish.
    KILN_CHECK(!r.stop.ignore_eos,
               "ignore_eos cannot be combined with a JSON or grammar constraint");
    KILN_CHECK(r.stop.min_new_tokens == 0,
               "min_new_tokens cannot be combined with a JSON or grammar constraint");
  }
  for (int32_t t : r.stop.stop_token_ids)
    KILN_CHECK(t >= 0 && t < limits.vocab, "stop token id {} is outside the vocabulary [0, {})", t,
               limits.vocab);
  KILN_CHECK(r.logprobs >= -1 && r.logprobs <= 1024, "logprobs must be in [-1, 1024], got {}",
             r.logprobs);
  KILN_CHECK(r.prompt_logprobs_from >= -1 &&
                 r.prompt_logprobs_from <= static_cast<int64_t>(r.prompt_ids.size()),
             "the prompt logprob start {} is outside [-1, {}] (the prompt's length)",
             r.prompt_logprobs_from, r.prompt_ids.size());
  if (r.hidden != HiddenOutput::kNone) {
    KILN_CHECK(r.stop.max_new_tokens == 0, "an embedding request generates no tokens");
    KILN_CHECK(r.prompt_logprobs_from < 0, "an embedding request scores no prompt tokens");
  }
  const auto total = static_cast<int64_t>(r.prompt_ids.size()) + r.stop.max_new_tokens;
  KILN_CHECK(total <= limits.context,
             "the prompt ({} tokens) plus max_new_tokens ({}) exceeds the context length ({})",
             r.prompt_ids.size(), r.stop.max_new_tokens, limits.context);
  // A request that could not fit in the pool even alone would be preempted forever.
  KILN_CHECK((total + limits.page_size - 1) / limits.page_size <= limits.kv_pages,
             "the prompt ({} tokens) plus max_new_tokens ({}) exceeds the KV cache capacity ({} "
             "tokens)",
             r.prompt_ids.size(), r.stop.max_new_tokens, limits.kv_pages * limits.page_size);
}

}  // namespace kiln::engine
