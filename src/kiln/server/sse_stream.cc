#include "kiln/server/sse_stream.h"

#include "kiln/base/log.h"
#include "kiln/server/http_error.h"

namespace kiln::server {

std::string sse_data(const nlohmann::json& payload) {
  return "data: " + dump_json(payload) + "\n\n";
}

namespace {

struct StreamState {
  std::shared_ptr<GenerationJob> job;
  SseRenderer renderer;
  ServerState* server = nullptr;
  std::unique_ptr<ActiveGeneration> active;
  bool done = false;
  bool cancelled_for_drain = false;
};

// One round: waits briefly for an update and writes what it renders (the end of the stream
// included, which sets st.done). False when a write failed.
bool write_next(StreamState& st, const BodyWriter& write) {
  GenerationJob& job = *st.job;
  // A draining server ends streams at once: their client has every token so far and gets a
  // final "abort" event; only non-streaming requests are worth waiting for.
  if (st.server->draining.load() && !st.cancelled_for_drain) {
    st.cancelled_for_drain = true;
    job.cancel_all();
  }
  // Blocks this worker briefly; the caller loops, so the wait is a loop with a bounded sleep,
  // not a busy spin.
  auto update = job.next(std::chrono::milliseconds(200));
  std::string chunk;
  if (update) {
    for (const auto& payload : st.renderer.on_update(job, *update)) chunk += sse_data(payload);
  }
  if (job.all_finished()) {
    if (st.renderer.on_finish) {
      for (const auto& payload : st.renderer.on_finish(job)) chunk += sse_data(payload);
    }
    chunk += kSseDone;
  }
  if (!chunk.empty() && !write(chunk)) return false;
  if (job.all_finished()) st.done = true;
  return true;
}

}  // namespace

void stream_job(HttpResponse& res, std::shared_ptr<GenerationJob> job, ServerState& state,
                SseRenderer renderer) {
  auto st = std::make_shared<StreamState>();
  st->job = std::move(job);
  st->renderer = std::move(renderer);
  st->server = &state;
  st->active = std::make_unique<ActiveGeneration>(state);
  res.headers.set("Cache-Control", "no-cache");
  res.headers.set("X-Accel-Buffering", "no");
  res.set_producer("text/event-stream", [st](const BodyWriter& write) {
    bool complete = false;
    // Runs after the handler returned, outside the router's error translation: a failure
    // here can only end the stream (the status line is already sent).
    try {
      while (!st->done && write_next(*st, write)) {
      }
      complete = st->done;
    } catch (const std::exception& e) {
      KILN_LOG_ERROR("stream aborted: {}", e.what());
    }
    // On a write failure (client gone) stop generating now rather than at max_tokens.
    if (!complete) st->job->cancel_all();
    st->active.reset();
    return complete;
  });
}

}  // namespace kiln::server
