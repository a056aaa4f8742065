// Runs forward steps of one model: turns a StepBatch into graph inputs, and executes the step
// either eagerly (trace the model for this batch's shapes, interpret it) or, for batches that
// fit a captured plan, through the plan replayer it was given (plan_replayer.h: the GraphRunner,
// or the GraphChecker around it).
#pragma once
#include <memory>

#include "kiln/base/thread_pool.h"
#include "kiln/engine/kv_pool.h"
#include "kiln/engine/plan_replayer.h"
#include "kiln/engine/serving_geometry.h"
#include "kiln/engine/step_batch.h"
#include "kiln/graph/interpreter.h"
#include "kiln/model/model_config.h"
#include "kiln/model/weight_store.h"

namespace kiln::engine {

class ModelRunner : public ModelExecutor {
 public:
  ModelRunner(const model::ModelConfig& config, model::WeightStore& weights, KvPool& pool,
              ThreadPool& threads, const ServingGeometry& geometry);

  // Batches that fit a captured plan replay it; everything else runs eagerly.
  void forward(const StepBatch& batch, StepOutput& out) override;
  // The graph runner, or under --check-graph the checker around it (null: always eager).
  void set_plan_replayer(PlanReplayer* replayer) { replayer_ = replayer; }
  // Always eager (the oracle for --check-graph and tests).
  void forward_eager(const StepBatch& batch, StepOutput& out);
  // forward() (Auto), forward_eager() (Eager), or a captured plan (Graph: throws kiln::Error
  // when no captured plan can run the batch, instead of silently running it eagerly).
  void forward_in_mode(const StepBatch& batch, StepOutput& out, StepMode mode);
  int64_t vocab_size() const override { return config_.vocab; }
  int64_t context_length() const override { return geometry_.context_length; }

  // The forward graph for a batch shape (what eager mode interprets and graph mode compiles).
  graph::Graph trace(const model::ForwardShape& shape) const;
  model::ForwardShape shape_of(const StepBatch& batch) const;
  int64_t max_pages_per_seq() const { return geometry_.max_pages_per_seq; }
  const ServingGeometry& geometry() const { return geometry_; }
  graph::KvGeometry kv_geometry() const;

  // Binds a batch's host vectors as graph inputs (borrowed, no copies but the block table).
  struct BoundInputs {
    std::vector<graph::Binding> bindings;
    std::vector<int32_t> block_table;  // [S, max_pages_per_seq]
    std::vector<int32_t> seq_lens;
    std::vector<int32_t> logit_rows;
    std::vector<int32_t> hidden_rows;
  };
  void bind(const StepBatch& batch, const model::ForwardShape& shape, BoundInputs& bound) const;

 private:
  void validate(const StepBatch& batch) const;
  void run_eager(const StepBatch& batch, StepOutput& out);  // a validated batch

  model::ModelConfig config_;
  model::WeightStore& weights_;
  KvPool& pool_;
  ServingGeometry geometry_;  // the pool's (its kv is pool_.config())
  graph::Interpreter interpreter_;
  PlanReplayer* replayer_ = nullptr;
};

}  // namespace kiln::engine
