// The real GenerationBackend: engine::Engine. Kept out of backend.h so that code using only the
// interface (and its tests with a fake engine) does not need the engine library linked.
#pragma once
#include "kiln/engine/engine.h"
#include "kiln/server/backend.h"

namespace kiln::server {

// Adapts engine::Engine to GenerationBackend.
class EngineBackend final : public GenerationBackend {
 public:
  explicit EngineBackend(engine::Engine& engine) : engine_(engine) {}
  uint64_t submit(engine::GenerateRequest request, engine::EventCallback on_event) override {
    return engine_.submit(std::move(request), std::move(on_event));
  }
  void cancel(uint64_t request_id) override { engine_.cancel(request_id); }
  bool flush_cache() override { return engine_.flush_cache(); }
  engine::EngineStats stats() const override { return engine_.stats(); }

 private:
  engine::Engine& engine_;
};

}  // namespace kiln::server
