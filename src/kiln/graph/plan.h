// A captured execution plan for one batch size: the optimized graph lowered once into a flat
// array of Steps with every pointer resolved (DESIGN.md "NPUGraph capture / replay").
//
// Capture happens in two phases so that every plan of a GraphRunner can share ONE arena:
// `Plan::prepare` plans memory (liveness offsets) and reports the arena bytes it needs; once
// the runner has allocated an arena as large as the largest plan, `bind` lowers each node
// against that arena. Replay then does no heap allocation, no shape logic, no kernel
// selection and no string lookups: it runs the update hooks, then the steps level by level
// with one barrier per level (independent nodes of a level share it).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "kiln/base/tensor.h"
#include "kiln/base/thread_pool.h"
#include "kiln/graph/ir.h"
#include "kiln/graph/lowering.h"
#include "kiln/graph/memory_planner.h"

namespace kiln::graph {

struct PlanOptions {
  // Run independent nodes of a level without barriers between them (one barrier per level);
  // false: one barrier after every step, like eager mode (for measuring the difference).
  bool level_barriers = true;
};

// A static buffer a caller fills before each replay (graph inputs) or reads after (outputs).
struct PlanBuffer {
  std::string name;
  ValueType type;
  Tensor tensor;  // owned by the plan; its address never changes
};

struct PlanStats {
  int steps = 0;
  int barriers = 0;          // per replay
  int barriers_unfused = 0;  // one per step (what eager mode pays)
  int update_hooks = 0;
  size_t arena_bytes = 0;    // this plan's peak
  size_t planned_bytes = 0;  // sum of its intermediate buffers
};

class Plan {
 public:
  // Plans memory for `graph` (already optimized or not). `memory` may come from the compile
  // cache, in which case planning is skipped.
  static std::unique_ptr<Plan> prepare(Graph graph, const PlanOptions& options,
                                       std::optional<MemoryPlan> memory = std::nullopt);

  size_t arena_bytes() const { return memory_.arena_bytes; }
  const Graph& graph() const { return graph_; }
  const MemoryPlan& memory() const { return memory_; }

  // Lowers every node against `arena` (at least arena_bytes()), the weights and the KV pool.
  void bind(void* arena, WeightProvider& weights, const KvGeometry& kv, void* kv_pool, int n_threads);

  // Static input/output buffers, by graph input name / output index.
  PlanBuffer& input(std::string_view name);
  PlanBuffer* find_input(std::string_view name);
  const Tensor& output(int i) const { return outputs_[i].tensor; }

  // Checks that `kv_pool` is the address the plan was captured with (state must not move).
  void check_state(const void* kv_pool) const;

  void replay(ThreadPool& pool);
  const PlanStats& stats() const { return stats_; }

 private:
  Plan() = default;
  void* address_of(Value v);

  Graph graph_;
  PlanOptions options_;
  MemoryPlan memory_;
  char* arena_ = nullptr;
  void* kv_pool_ = nullptr;
  std::vector<PlanBuffer> inputs_;
  std::vector<PlanBuffer> outputs_;
  std::vector<int> input_of_node_;   // node -> index in inputs_, or -1
  std::vector<Step> steps_;
  std::vector<int> level_end_;       // steps_[level_end_[i-1] .. level_end_[i]) form level i
  std::vector<int> hook_steps_;      // indices of steps with an update hook
  std::vector<std::shared_ptr<void>> owned_;
  std::vector<Tensor> scratch_;
  SpinBarrier barrier_;
  PlanStats stats_;
};

}  // namespace kiln::graph
