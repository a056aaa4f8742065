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
  // A captured plan fits `batch` (a decode batch of a captured size, or a verify batch).
  virtual bool can_run(const StepBatch& batch) const = 0;
  virtual void run(const StepBatch& batch, StepOutput& out) = 0;
};

}  // namespace kiln::engine
