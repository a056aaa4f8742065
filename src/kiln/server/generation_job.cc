#include "kiln/server/generation_job.h"

#include <algorithm>

#include "kiln/base/log.h"

namespace kiln::server {

double SequenceResult::e2e_seconds() const {
  auto end = finished ? finished_at : Clock::now();
  return std::chrono::duration<double>(end - submitted).count();
}

const engine::TokenLogprob* SequenceResult::prompt_score(size_t pos) const {
  if (prompt_logprobs_from < 0) return nullptr;
  const size_t first = std::max<size_t>(static_cast<size_t>(prompt_logprobs_from), 1);
  if (pos < first || pos - first >= prompt_logprobs.size()) return nullptr;
  return &prompt_logprobs[pos - first];
}

GenerationJob::GenerationJob(GenerationBackend& backend, std::shared_ptr<Metrics> metrics,
                             std::string route)
    : backend_(backend), metrics_(std::move(metrics)), route_(std::move(route)) {}

GenerationJob::~GenerationJob() {
  cancel_all();
  // The engine answers a cancel with the request's final (abort) event; applying it here is
  // what counts and logs requests whose client went away. Bounded, in case the engine is gone.
  auto deadline = Clock::now() + std::chrono::seconds(2);
  while (!all_finished() && Clock::now() < deadline) next(std::chrono::milliseconds(50));
}

void GenerationJob::start(std::vector<engine::GenerateRequest> requests) {
  results_.resize(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    results_[i].submitted = Clock::now();
    results_[i].prompt_ids = requests[i].prompt_ids;
    results_[i].prompt_logprobs_from = requests[i].prompt_logprobs_from;
    // The callback holds the inbox and the metrics, not the job: the engine may still call it
    // after the HTTP request is gone (the final abort event of a cancelled request).
    std::shared_ptr<Inbox> inbox = inbox_;
    std::shared_ptr<Metrics> metrics = metrics_;
    const Clock::time_point submitted = results_[i].submitted;
    try {
      results_[i].engine_id = backend_.submit(
          std::move(requests[i]), [inbox, metrics, submitted, i](const engine::RequestEvent& e) {
            // Counted here, on the scheduler thread, before the engine publishes the stats
            // that show the request gone: /metrics never shows an idle engine with a finished
            // request not yet counted (the HTTP worker may apply the event much later).
            if (e.finished) {
              metrics->request_finished(
                  e.finish_reason, e.prompt_tokens, e.completion_tokens, e.cached_tokens,
                  std::chrono::duration<double>(Clock::now() - submitted).count());
            }
            {
              std::lock_guard lock(inbox->mu);
              inbox->events.push_back({i, e});
            }
            inbox->cv.notify_one();
          });
    } catch (...) {
      results_.resize(i);  // only the submitted ones are cancelled
      unfinished_ = i;
      cancel_all();
      results_.clear();
      unfinished_ = 0;
      throw;
    }
    ++unfinished_;
  }
}

std::optional<GenerationJob::Update> GenerationJob::next(std::chrono::milliseconds timeout) {
  std::unique_lock lock(inbox_->mu);
  if (!inbox_->cv.wait_for(lock, timeout, [&] { return !inbox_->events.empty(); })) {
    return std::nullopt;
  }
  Update u = std::move(inbox_->events.front());
  inbox_->events.pop_front();
  lock.unlock();
  apply(u);
  return u;
}

void GenerationJob::wait_all(const std::function<bool()>& abandoned) {
  // The poll interval bounds how long a gone client's requests keep running (one check is a
  // non-blocking peek at the socket).
  const auto poll = std::chrono::milliseconds(abandoned ? 100 : 1000);
  bool cancelled = false;
  while (!all_finished()) {
    next(poll);
    if (!cancelled && abandoned && !all_finished() && abandoned()) {
      KILN_LOG_INFO("{}: the client closed its connection; cancelling its requests", route_);
      cancel_all();
      cancelled = true;
    }
  }
}

void GenerationJob::apply(const Update& u) {
  SequenceResult& r = results_[u.index];
  if (r.finished) return;  // defensive: the engine promises one finished event
  const engine::RequestEvent& e = u.event;
  auto now = Clock::now();
  if (!e.new_tokens.empty()) {
    if (r.first_token == Clock::time_point{}) {
      r.first_token = now;
      metrics_->observe_ttft(std::chrono::duration<double>(now - r.submitted).count());
    } else {
      metrics_->observe_itl(std::chrono::duration<double>(now - r.last_token).count());
    }
    r.last_token = now;
  }
  r.text += e.text_delta;
  r.output_ids.insert(r.output_ids.end(), e.new_tokens.begin(), e.new_tokens.end());
  r.logprobs.insert(r.logprobs.end(), e.logprobs.begin(), e.logprobs.end());
  if (!e.prompt_logprobs.empty()) r.prompt_logprobs = e.prompt_logprobs;
  r.prompt_tokens = e.prompt_tokens;
  r.completion_tokens = e.completion_tokens;
  r.cached_tokens = e.cached_tokens;
  r.spec_verify_ct = e.spec_verify_ct;
  r.spec_proposed = e.spec_proposed;
  r.spec_accepted = e.spec_accepted;
  if (!e.finished) return;
  r.finished = true;
  r.finished_at = now;
  r.finish_reason = e.finish_reason;
  r.matched_stop = e.matched_stop;
  r.matched_stop_token = e.matched_stop_token;
  r.error = e.error;
  --unfinished_;
  double e2e = r.e2e_seconds();
  KILN_LOG_INFO("{} id={} finish={}{} prompt={} cached={} completion={} ttft={:.3f}s e2e={:.3f}s",
                route_, r.engine_id, finish_reason_string(e.finish_reason),
                e.error.empty() ? "" : " (" + e.error + ")", r.prompt_tokens, r.cached_tokens,
                r.completion_tokens,
                r.first_token == Clock::time_point{}
                    ? 0.0
                    : std::chrono::duration<double>(r.first_token - r.submitted).count(),
                e2e);
}

void GenerationJob::cancel_all() {
  for (auto& r : results_) {
    if (!r.finished && !r.cancel_requested) {
      r.cancel_requested = true;
      backend_.cancel(r.engine_id);
    }
  }
}

}  // namespace kiln::server
