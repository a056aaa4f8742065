#include "kiln/server/native_responses.h"

#include <algorithm>
#include <string>

namespace kiln::server {

using nlohmann::json;

json native_finish_reason(const SequenceResult& r) {
  if (!r.finished) return nullptr;
  switch (r.finish_reason) {
    case engine::FinishReason::Stop: {
      json matched = nullptr;  // the end-of-sequence token ends a request without a match
      if (!r.matched_stop.empty()) {
        matched = r.matched_stop;
      } else if (r.matched_stop_token >= 0) {
        matched = r.matched_stop_token;
      }
      return {{"type", "stop"}, {"matched", matched}};
    }
    case engine::FinishReason::Length:
      return {{"type", "length"}, {"length", r.completion_tokens}};
    case engine::FinishReason::Abort:
    case engine::FinishReason::None:
      break;
  }
  return {{"type", "abort"}, {"message", r.error.empty() ? "aborted" : r.error}};
}

namespace {

json logprob_entry(float logprob, int32_t token, bool with_text, const TextCodec& codec) {
  json text = with_text ? json(codec.decode({token}, false)) : json(nullptr);
  return json::array({logprob, token, text});
}

}  // namespace

json native_output(const SequenceResult& r, const NativeGenerateRequest& request,
                   const TextCodec& codec) {
  json meta = {{"id", std::to_string(r.engine_id)},
               {"finish_reason", native_finish_reason(r)},
               {"prompt_tokens", r.prompt_tokens},
               {"completion_tokens", r.completion_tokens},
               {"cached_tokens", r.cached_tokens}};
  if (r.finished) meta["e2e_latency"] = r.e2e_seconds();
  if (r.spec_verify_ct >= 0) {
    // SGLang's names: verify steps, and completion tokens per verify step.
    meta["spec_verify_ct"] = r.spec_verify_ct;
    meta["spec_accept_length"] =
        r.spec_verify_ct > 0 ? static_cast<double>(r.completion_tokens) / r.spec_verify_ct : 0.0;
    meta["spec_num_proposed_drafts"] = r.spec_proposed;
    meta["spec_num_correct_drafts"] = r.spec_accepted;
  }
  if (request.return_logprob) {
    const bool with_text = request.return_text_in_logprobs;
    json tokens = json::array();
    json tops = json::array();
    for (const auto& lp : r.logprobs) {
      tokens.push_back(logprob_entry(lp.logprob, lp.token, with_text, codec));
      json top = json::array();
      for (const auto& [id, alt] : lp.top) top.push_back(logprob_entry(alt, id, with_text, codec));
      tops.push_back(std::move(top));
    }
    meta["output_token_logprobs"] = std::move(tokens);
    if (request.top_logprobs_num > 0) meta["output_top_logprobs"] = std::move(tops);
    // The prompt from logprob_start_len on; position 0 has no logprob, as in SGLang.
    json in_tokens = json::array();
    json in_tops = json::array();
    const size_t n_prompt = r.prompt_ids.size();
    for (size_t p = static_cast<size_t>(std::max(r.prompt_logprobs_from, 0));
         r.prompt_logprobs_from >= 0 && p < n_prompt; ++p) {
      const engine::TokenLogprob* lp = r.prompt_score(p);
      if (lp == nullptr && p > 0) break;  // not scored yet (a stream's early chunks)
      const int32_t id = r.prompt_ids[p];
      json text = with_text ? json(codec.decode({id}, false)) : json(nullptr);
      in_tokens.push_back(json::array({lp ? json(lp->logprob) : json(nullptr), id, text}));
      json top = nullptr;
      if (lp != nullptr) {
        top = json::array();
        for (const auto& [alt_id, alt] : lp->top)
          top.push_back(logprob_entry(alt, alt_id, with_text, codec));
      }
      in_tops.push_back(std::move(top));
    }
    meta["input_token_logprobs"] = std::move(in_tokens);
    if (request.top_logprobs_num > 0) meta["input_top_logprobs"] = std::move(in_tops);
  }
  return {{"text", r.text}, {"output_ids", r.output_ids}, {"meta_info", std::move(meta)}};
}

}  // namespace kiln::server
