// What speculative decoding needs beside its configuration: live objects the engine does not
// own and test hooks. Kept out of EngineConfig (engine_config.h), which stays plain data that
// the server and the CLI can copy and print; the CLI and tests build this and hand it to the
// Engine (or Scheduler) constructor.
#pragma once
#include <cstdint>
#include <functional>

#include "kiln/engine/step_batch.h"

namespace kiln::engine {

class KvPool;

struct SpeculativeResources {
  // SpeculativeConfig::draft_model: the draft model's executor and KV pool (not owned; they
  // outlive the engine). Its vocabulary must be the target's (check_draft_vocabulary).
  ModelExecutor* draft_executor = nullptr;
  KvPool* draft_pool = nullptr;
  // Step time by rows for the speculation policy (speculation_policy.h); unset: measured from
  // the executor's decode and verify steps (and the draft model's steps). Tests set a fake
  // one, and with it draft_step_cost, one draft-model step's cost in the same units: then no
  // decision depends on the host's timing.
  std::function<double(int64_t rows)> step_cost;
  double draft_step_cost = 0.0;
};

}  // namespace kiln::engine
