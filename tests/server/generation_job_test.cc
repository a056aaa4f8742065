// A finished request is counted in the metrics when the engine emits its final event, not when
// the HTTP worker gets around to applying it: /metrics must never show an idle engine with a
// finished request missing (a stream whose client left may never apply its abort event).
#include "kiln/server/generation_job.h"

#include <gtest/gtest.h>

#include <string>

namespace kiln::server {
namespace {

// Finishes every request inside submit(), like an engine that is done before the HTTP worker
// looks at the job again.
class InstantBackend final : public GenerationBackend {
 public:
  uint64_t submit(engine::GenerateRequest, engine::EventCallback cb) override {
    engine::RequestEvent e;
    e.finished = true;
    e.finish_reason = engine::FinishReason::Abort;
    e.prompt_tokens = 3;
    cb(e);
    return ++ids_;
  }
  void cancel(uint64_t) override {}
  bool flush_cache() override { return true; }
  engine::EngineStats stats() const override { return {}; }

 private:
  uint64_t ids_ = 0;
};

TEST(GenerationJob, CountsAFinishedRequestBeforeItsEventIsApplied) {
  InstantBackend backend;
  auto metrics = std::make_shared<Metrics>();
  auto job = std::make_shared<GenerationJob>(backend, metrics, "/generate");
  job->start(std::vector<engine::GenerateRequest>(2));
  // Nothing has called next(): the events still sit in the job's inbox.
  const std::string text = metrics->render(engine::EngineStats{});
  EXPECT_NE(text.find("kiln_requests_total{finish_reason=\"abort\"} 2\n"), std::string::npos)
      << text;
  // Applying the events later does not count them again.
  job->wait_all();
  EXPECT_NE(metrics->render(engine::EngineStats{})
                .find("kiln_requests_total{finish_reason=\"abort\"} 2\n"),
            std::string::npos);
}

}  // namespace
}  // namespace kiln::server
