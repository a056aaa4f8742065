// The engine requests behind one HTTP request (a batch of prompts times n samples), and the
// results accumulated from their events. The engine calls back on its scheduler thread; the
// callback only queues the event, and the HTTP worker thread applies it here (so the
// scheduler never waits on a socket). Destroying a job cancels what is still running, which
// is how a client that goes away frees its KV pages.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "kiln/engine/request.h"
#include "kiln/server/backend.h"
#include "kiln/server/metrics.h"

namespace kiln::server {

using Clock = std::chrono::steady_clock;

// One generated sequence, as accumulated so far.
struct SequenceResult {
  uint64_t engine_id = 0;
  std::string text;
  std::vector<int32_t> output_ids;
  std::vector<engine::TokenLogprob> logprobs;
  // The prompt as the engine got it, and its scores when the request asked for them
  // (engine::GenerateRequest::prompt_logprobs_from; -1: not asked).
  std::vector<int32_t> prompt_ids;
  int prompt_logprobs_from = -1;
  std::vector<engine::TokenLogprob> prompt_logprobs;
  bool finished = false;
  engine::FinishReason finish_reason = engine::FinishReason::None;
  std::string matched_stop;
  int32_t matched_stop_token = -1;
  std::string error;
  bool cancel_requested = false;
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached_tokens = 0;
  int spec_verify_ct = -1;  // -1: the engine does not speculate
  int spec_proposed = 0;
  int spec_accepted = 0;
  Clock::time_point submitted{};
  Clock::time_point first_token{};  // epoch until the first token arrives
  Clock::time_point last_token{};
  Clock::time_point finished_at{};
  double e2e_seconds() const;
  // The score of prompt position `pos`, or null: position 0, positions before the start, or
  // scores that have not arrived yet.
  const engine::TokenLogprob* prompt_score(size_t pos) const;
};

class GenerationJob {
 public:
  GenerationJob(GenerationBackend& backend, std::shared_ptr<Metrics> metrics, std::string route);
  ~GenerationJob();  // cancels every unfinished sequence and collects its final event
  GenerationJob(const GenerationJob&) = delete;
  GenerationJob& operator=(const GenerationJob&) = delete;

  // Submits every request. If one is refused (kiln::Error, QueueFull), the ones already
  // submitted are cancelled and the exception propagates.
  void start(std::vector<engine::GenerateRequest> requests);

  // An event applied to sequence `index` (the event is also returned for streaming deltas).
  struct Update {
    size_t index = 0;
    engine::RequestEvent event;
  };
  // Waits up to `timeout` for the next event; nullopt when none came.
  std::optional<Update> next(std::chrono::milliseconds timeout);
  // Blocks until every sequence has finished. `abandoned` (when given) is polled while
  // waiting: once it says the client has gone, every sequence is cancelled, and the wait ends
  // when the engine has aborted them (their KV pages are then back).
  void wait_all(const std::function<bool()>& abandoned = {});

  bool all_finished() const { return unfinished_ == 0; }
  size_t size() const { return results_.size(); }
  const SequenceResult& result(size_t i) const { return results_[i]; }
  void cancel_all();

 private:
  struct Inbox {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Update> events;
  };
  void apply(const Update& u);

  GenerationBackend& backend_;
  std::shared_ptr<Metrics> metrics_;
  std::string route_;
  std::shared_ptr<Inbox> inbox_ = std::make_shared<Inbox>();
  std::vector<SequenceResult> results_;
  size_t unfinished_ = 0;
};

}  // namespace kiln::server
