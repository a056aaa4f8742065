// What runs a step from a captured plan instead of interpreting it: the graph runner
// (graph_mode/graph_runner.h), or the --check-graph checker around it, which runs the same
// step and compares (graph_mode/graph_checker.h). ModelRunner (model_runner.h) hands the steps
// a replayer can take to the one it is given and interprets the rest, so the model runner only
// knows this interface and the graph-mode files depend on it, never the other way round.
#pragma once
#include "kiln/engine/step_batch.h"

namespace kiln::engine {

class PlanReplayer {
 public:
  virtual ~PlanReplayer() = default;
  // Runs `batch` from the captured plan that fits it (a decode batch of a captured size, or a
  // verify batch) and returns true; returns false, having done nothing, when none fits. One
  // call looks the plan up once: the step's only lookup.
  virtual bool try_run(const StepBatch& batch, StepOutput& out) = 0;
};

}  // namespace kiln::engine
