// Eager mode: executes a graph node by node, as traced, with a buffer for every value (taken
// from a cache of buffers freed by earlier values and runs; each value is dropped after its last
// reader), lowering each node when it reaches it and running it on the whole thread pool (one
// barrier per op). It is the correctness oracle for graph mode and the honest baseline it is
// measured against: the same kernels, nothing slowed down on purpose.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kiln/base/tensor.h"
#include "kiln/base/thread_pool.h"
#include "kiln/graph/buffer_cache.h"
#include "kiln/graph/lowering.h"

namespace kiln::graph {

struct Binding {
  std::string name;  // graph input or state name
  Tensor tensor;
};

class Interpreter {
 public:
  Interpreter(ThreadPool& pool, WeightProvider& weights, const KvGeometry& kv)
      : pool_(pool), weights_(weights), kv_(kv), buffers_(std::make_shared<BufferCache>()) {}

  // Called after each node with its index and output tensors (for --check-graph).
  using NodeObserver = std::function<void(int node, const std::vector<Tensor>& outputs)>;

  // Runs the graph once; returns its outputs. Every input and state named by the graph must
  // be bound, with the declared dtype and shape (else Error). The observer sees each node's
  // outputs before they can be dropped; a handle it keeps keeps the buffer.
  std::vector<Tensor> run(const Graph& graph, const std::vector<Binding>& bindings,
                          const NodeObserver& observer = nullptr);

  // Where value buffers come from and go back to (for tests and memory figures).
  const BufferCache& buffers() const { return *buffers_; }

 private:
  ThreadPool& pool_;
  WeightProvider& weights_;
  KvGeometry kv_;
  std::shared_ptr<BufferCache> buffers_;
};

// Runs one step on every thread of the pool as a single group.
void run_step_on_pool(ThreadPool& pool, Step& step, SpinBarrier& barrier);

}  // namespace kiln::graph
