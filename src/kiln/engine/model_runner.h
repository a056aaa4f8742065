// Runs forward steps of one model: turns a StepBatch into graph inputs, and executes the step
// either eagerly (trace the model for this batch's shapes, interpret it) or, for decode
// batches that fit a captured plan, through the GraphRunner.
#pragma once
#include <memory>

#include "kiln/base/thread_pool.h"
#include "kiln/engine/kv_pool.h"
#include "kiln/engine/step_batch.h"
#include "kiln/graph/interpreter.h"
#include "kiln/model/model_config.h"
#include "kiln/model/weight_store.h"

namespace kiln::engine {

class GraphChecker;
class GraphRunner;

class ModelRunner : public ModelExecutor {
 public:
  ModelRunner(const model::ModelConfig& config, model::WeightStore& weights, KvPool& pool,
              ThreadPool& threads, int64_t context_length);

  // Decode batches that fit a captured plan replay it; everything else runs eagerly.
  void forward(const StepBatch& batch, StepOutput& out) override;
  void set_graph_runner(GraphRunner* graph) { graph_ = graph; }
  // --check-graph: graph-mode steps go through the checker (which also runs them for real).
  void set_graph_checker(GraphChecker* checker) { checker_ = checker; }
  // Always eager (the oracle for --check-graph and tests).
  void forward_eager(const StepBatch& batch, StepOutput& out);
  // forward() (Auto), forward_eager() (Eager), or a captured plan (Graph: throws kiln::Error
  // when no captured plan can run the batch, instead of silently running it eagerly).
  void forward_in_mode(const StepBatch& batch, StepOutput& out, StepMode mode);
  int64_t vocab_size() const override { return config_.vocab; }
  int64_t context_length() const override { return context_length_; }

  // The forward graph for a batch shape (what eager mode interprets and graph mode compiles).
  graph::Graph trace(const model::ForwardShape& shape) const;
  model::ForwardShape shape_of(const StepBatch& batch) const;
  int64_t max_pages_per_seq() const { return max_pages_per_seq_; }
  graph::KvGeometry kv_geometry() const;

  // Binds a batch's host vectors as graph inputs (borrowed, no copies but the block table).
  struct BoundInputs {
    std::vector<graph::Binding> bindings;
    std::vector<int32_t> block_table;  // [S, max_pages_per_seq]
    std::vector<int32_t> seq_lens;
    std::vector<int32_t> logit_rows;
  };
  void bind(const StepBatch& batch, const model::ForwardShape& shape, BoundInputs& bound) const;

 private:
  void validate(const StepBatch& batch) const;

  model::ModelConfig config_;
  model::WeightStore& weights_;
  KvPool& pool_;
  ThreadPool& threads_;
  int64_t context_length_;
  int64_t max_pages_per_seq_;
  graph::Interpreter interpreter_;
  GraphRunner* graph_ = nullptr;
  GraphChecker* checker_ = nullptr;
};

}  // namespace kiln::engine
