// --check-graph: runs every graph-mode decode step a second and third time to find where graph
// mode and eager mode part ways (docs/architecture.md, Terms: "--check-graph").
//
// For each decode step that the graph runner takes:
//   1. eager mode interprets the traced graph for the batch, keeping every node's output;
//   2. a `replay`-mode plan (the graph as traced, so the same nodes as eager, but with the
//      plan's arena, in-place aliasing, static buffers and padding) runs step by step, and
//      each node's outputs are compared with eager's right after the node ran; the first node
//      beyond the tolerance is reported;
//   3. the real (optimized) plan runs as it would without checking, and its final outputs
//      (greedy ids or logits) are compared with eager's. Fused nodes have no eager
//      counterpart, so the optimized plan is checked at its outputs only.
// All three write the same KV slots; the optimized plan runs last, so the cache ends up exactly
// as it would without --check-graph. Slow (three executions per step): a debugging aid.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kiln/base/thread_pool.h"
#include "kiln/engine/kv_pool.h"
#include "kiln/engine/plan_replayer.h"
#include "kiln/engine/step_batch.h"
#include "kiln/model/weight_store.h"

namespace kiln::engine {

class GraphRunner;
struct GraphRunnerOptions;
class ModelRunner;

struct GraphCheckOptions {
  // A value diverges where |graph - eager| > atol + rtol * |eager| (or NaN-ness differs).
  // Graph mode is meant to be bit-identical; the slack only absorbs harmless reorderings.
  double atol = 1e-4;
  double rtol = 1e-3;
  // Where report lines go; null: stderr.
  std::function<void(const std::string& line)> report;
};

struct NodeDivergence {
  int node = -1;
  std::string op;
  std::string type;  // the output's type, e.g. f32[8,640]
  int output = 0;
  double max_abs_diff = 0;
};

struct GraphCheckResult {
  int64_t step = 0;  // 1-based count of checked steps
  int nodes_compared = 0;
  int nodes_skipped = 0;  // outputs with no comparable eager counterpart (layout differs)
  std::optional<NodeDivergence> first_divergence;  // replay-mode plan vs eager
  double replay_max_abs_diff = 0;                  // over every compared node
  bool outputs_match = true;                       // optimized plan vs eager, final outputs
  double output_max_abs_diff = 0;
  int greedy_rows_differing = 0;
  bool ok() const { return !first_divergence && outputs_match; }
  std::string describe() const;  // "check-graph: step N OK ..." or the divergence
};

class GraphChecker : public PlanReplayer {
 public:
  // Captures replay-mode plans of the same kinds as `graph` (`captured`: the options `graph` was
  // made with), in an arena of its own.
  GraphChecker(ModelRunner& runner, GraphRunner& graph, model::WeightStore& weights, KvPool& pool,
               ThreadPool& threads, const GraphRunnerOptions& captured,
               GraphCheckOptions options = {});
  ~GraphChecker();

  // Checks one decode step the graph runner can take; `out` receives the optimized plan's
  // output, exactly as GraphRunner::run would produce it.
  GraphCheckResult step(const StepBatch& batch, StepOutput& out);
  // As a plan replayer (ModelRunner::set_plan_replayer): the steps the graph runner can take,
  // each checked.
  bool try_run(const StepBatch& batch, StepOutput& out) override;

  int64_t steps_checked() const { return steps_; }
  int64_t steps_failed() const { return failed_; }

 private:
  ModelRunner& runner_;
  GraphRunner& graph_;
  model::WeightStore& weights_;
  KvPool& pool_;
  ThreadPool& threads_;
  GraphCheckOptions options_;
  std::unique_ptr<GraphRunner> replay_;
  int64_t steps_ = 0;
  int64_t failed_ = 0;
};

}  // namespace kiln::engine
