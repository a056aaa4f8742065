// What one prefill step may still take on, as one object the scheduler asks and tests read:
// prompt tokens (max_prefill_tokens, capped by max_prefill_tokens_while_decoding while requests
// decode), running requests (max_running_requests), and KV pages. A waiting request is admitted
// when its pages fit in what the pool can give (free pages and evictable prefix-cache pages)
// beside a headroom of kPagesPerDecoder for every decoding request: each may need a fresh page
// at the next decode step, and admitting into that headroom would only preempt someone right
// after. The first request that does not fit stops admission (scheduler.h), so big requests are
// not starved.
//
// Decode steps grow requests a page at a time; when none is free, decode_page_source says where
// the page comes from: a cached page evicted, or, failing that, the least protected running
// request preempted (its pages freed).
#pragma once
#include <cstdint>

#include "kiln/engine/engine_config.h"

namespace kiln::engine {

class AdmissionBudget {
 public:
  static constexpr int64_t kPagesPerDecoder = 1;

  // `decoding_requests`: requests decoding now (their rows may ride along in this step);
  // `running_requests`: all requests holding pages (prefilling and decoding).
  AdmissionBudget(const EngineConfig& config, int64_t running_requests, int64_t decoding_requests);

  // Prompt tokens the step may still take.
  int64_t prompt_tokens() const { return prompt_tokens_; }
  void spend_prompt_tokens(int64_t n) { prompt_tokens_ -= n; }
  // Another request may be admitted: prompt tokens are left and a running slot is free.
  bool has_room() const { return prompt_tokens_ > 0 && running_ < max_running_; }
  // Pages kept back for the decoding requests' next tokens.
  int64_t headroom_pages() const { return headroom_; }
  // Whether a request needing `need_pages` pages beyond what the prefix cache serves it fits
  // in what the pool can give (`free_pages` + `evictable_pages`) beside the headroom.
  bool pages_fit(int64_t need_pages, int64_t free_pages, int64_t evictable_pages) const {
    return need_pages + headroom_ <= free_pages + evictable_pages;
  }
  void admitted() { ++running_; }  // a request took a running slot

 private:
  int64_t prompt_tokens_;
  int64_t running_;
  int64_t max_running_;
  int64_t headroom_;
};

// Where a decoding request's next page comes from.
enum class PageSource : uint8_t {
  Free,                  // a free page of the pool
  EvictCached,           // a page only the prefix cache holds, evicted (least recently used)
  PreemptLeastProtected  // pages of the least protected running request (schedule_policy.h)
};
PageSource decode_page_source(int64_t free_pages, int64_t evictable_pages);

}  // namespace kiln::engine
