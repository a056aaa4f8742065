// A captured execution plan for one batch size: the optimized graph lowered once into a flat
// array of Steps with every pointer resolved (docs/architecture.md, Terms: "capture / replay").
//
// Capture happens in two phases so that every plan of a GraphRunner can share ONE arena:
// `Plan::prepare` plans memory (liveness offsets) and reports the arena bytes it needs; once
// the runner has allocated an arena as large as the largest plan, `bind` lowers each node
// against that arena. Replay then does no heap allocation, no shape logic, no kernel
// selection and no string lookups: it runs the update hooks, then the steps level by level
// with one barrier per level (independent nodes of a level share it).
#pragma once
#include <functional>
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
  // Give the nodes of a level disjoint groups of threads when that balances better than
  // running them one after another on all threads ("several streams in one graph").
  bool worker_groups = true;
  // Split a level only when the grouped time estimate is below this fraction of running its
  // nodes one after another (tests raise it to force splitting).
  double group_threshold = 0.9;
};

// What the plans of one runner share because only one of them runs at a time, besides the
// arena (see Plan::bind).
struct PlanSharing {
  // Where the plan's outputs live (at least output_bytes(), 64-byte aligned). A plan's outputs
  // then stay valid only until another plan sharing the region replays, like its arena bytes.
  // null: the plan allocates outputs of its own.
  void* outputs = nullptr;
  // Kernel objects refreshed by every replay (attention work lists). null: the plan owns them.
  SharedLowering* lowering = nullptr;
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
  int grouped_levels = 0;    // levels whose nodes run on disjoint worker groups
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
  // Kernel scratch is laid out but not placed: call set_scratch() before replaying.
  void bind(void* arena, WeightProvider& weights, const KvGeometry& kv, void* kv_pool,
            int n_threads, const PlanSharing& sharing = {});
  // Bytes of the outputs, each 64-byte aligned (what PlanSharing::outputs must hold).
  size_t output_bytes() const;
  // Scratch (quantized activations, attention partials) this plan needs: steps of one level
  // run concurrently and get disjoint ranges; levels run one after another and reuse them.
  size_t scratch_bytes() const { return scratch_bytes_; }
  // Points the steps at `scratch` (at least scratch_bytes(), 64-byte aligned). Plans of one
  // runner share a single scratch buffer, as they share the arena: one plan runs at a time.
  void set_scratch(void* scratch);

  // Static input/output buffers, by graph input name / output index.
  PlanBuffer& input(std::string_view name);
  PlanBuffer* find_input(std::string_view name);
  // Valid once bound.
  const Tensor& output(int i) const { return outputs_[i].tensor; }

  // Checks that `kv_pool` is the address the plan was captured with (state must not move).
  void check_state(const void* kv_pool) const;

  void replay(ThreadPool& pool);
  // Diagnostics (`kiln bench`): everything replay() does except the kernels themselves (the
  // replay-time updates, the walk over every level with its group dispatch and level barriers,
  // the output copies; barriers inside kernels count as kernel time), so that graph mode's
  // host overhead is timed directly over many replays instead of as the difference of two
  // noisy step times. The outputs hold stale values.
  void replay_host_only(ThreadPool& pool);
  const PlanStats& stats() const { return stats_; }

  // Diagnostics (--check-graph, `kiln bench`), never on the serving path. Runs the steps one at
  // a time in order, each on the whole pool with its update hook (like eager mode), and calls
  // `after_step` with the step's graph node once it has finished: a value's arena bytes may be
  // reused by later steps, so it must be inspected right after the step that defines it.
  void replay_stepwise(ThreadPool& pool, const std::function<void(int node)>& after_step);
  // A borrowed view of where the plan keeps value `v` (arena, static input/output, state).
  Tensor value_view(Value v);

 private:
  Plan() = default;
  template <bool kRunKernels>
  void replay_levels(ThreadPool& pool);
  void* address_of(Value v);
  // Where the bytes of graph output i are produced: its own buffer, or (for a value returned
  // twice, a view of another output or of an input) somewhere replay copies them from.
  void* produced_at(int i);
  double cost_of(int node) const;
  void place_level(int first_step, const std::vector<int>& nodes, int n_threads);

  Graph graph_;
  PlanOptions options_;
  MemoryPlan memory_;
  char* arena_ = nullptr;
  void* kv_pool_ = nullptr;
  std::vector<PlanBuffer> inputs_;
  std::vector<PlanBuffer> outputs_;
  bool outputs_shared_ = false;     // outputs_ borrow PlanSharing::outputs
  std::vector<int> input_of_node_;  // node -> index in inputs_, or -1
  // Computed values whose reshape is a graph output: the value is written straight into that
  // output's buffer (same bytes), since its arena slot may be reused before replay ends.
  std::vector<std::pair<Value, int>> view_home_;
  // Outputs whose bytes a step writes elsewhere, copied after the last level of a replay.
  struct OutputCopy {
    const void* from = nullptr;
    void* to = nullptr;
    size_t bytes = 0;
  };
  std::vector<OutputCopy> output_copies_;
  void copy_outputs(int tid, int nth) const;
  std::vector<Step> steps_;
  struct Placement {
    int first = 0;     // first thread of the step's worker group
    int count = 0;     // threads in it (0: all)
    int barrier = -1;  // index into group_barriers_, -1: the plan's barrier
  };
  std::vector<Placement> placement_;  // per step
  std::vector<std::unique_ptr<SpinBarrier>> group_barriers_;
  std::vector<int> level_end_;   // steps_[level_end_[i-1] .. level_end_[i]) form level i
  std::vector<int> hook_steps_;  // indices of steps with an update hook
  std::vector<std::shared_ptr<void>> owned_;
  std::vector<int64_t> scratch_offset_;  // per step, -1: none
  size_t scratch_bytes_ = 0;
  SpinBarrier barrier_;
  int barrier_participants_ = 0;
  PlanStats stats_;
};

}  // namespace kiln::graph
