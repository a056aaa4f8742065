#include "kiln/engine/admission_budget.h"

#include <algorithm>

namespace kiln::engine {

AdmissionBudget::AdmissionBudget(const EngineConfig& config, int64_t running_requests,
                                 int64_t decoding_requests)
    : prompt_tokens_(config.max_prefill_tokens),
      running_(running_requests),
      max_running_(config.max_running_requests),
      headroom_(kPagesPerDecoder * decoding_requests) {
  // Decode rows wait for prefill steps (or share them): the cap bounds what a prompt adds to
  // their inter-token latency.
  if (decoding_requests > 0 && config.max_prefill_tokens_while_decoding > 0) {
    prompt_tokens_ = std::min<int64_t>(prompt_tokens_, config.max_prefill_tokens_while_decoding);
  }
}

PageSource decode_page_source(int64_t free_pages, int64_t evictable_pages) {
  if (free_pages > 0) return PageSource::Free;
  if (evictable_pages > 0) return PageSource::EvictCached;
  return PageSource::PreemptLeastProtected;
}

}  // namespace kiln::engine
