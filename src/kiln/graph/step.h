// A lowered node: the kernel to call and every argument it needs, resolved. The eager
// interpreter builds a Step for each node every time it runs one; a Plan builds them once at
// capture and replays the flat array. Steps are plain data (no heap, no strings) so replay
// touches nothing but the kernels.
#pragma once
#include <cstdint>
#include <type_traits>

#include "kiln/graph/step_args.h"
#include "kiln/kernels/exec_context.h"

namespace kiln::graph {

struct Step {
  static constexpr int kMaxInputs = 9;  // qk_norm_rope_kv_write with its frequency factors
  static constexpr int kMaxOutputs = 4;

  using RunFn = void (*)(const Step& step, const kernels::ExecContext& ctx);
  // Host-side refresh from host values (attention's work split from sequence lengths), run
  // on one thread before the step at every execution: the replay-time update hook.
  using UpdateFn = void (*)(Step& step, int n_threads);

  RunFn run = nullptr;
  UpdateFn update = nullptr;
  const void* in[kMaxInputs] = {};  // absent optional inputs stay null
  void* out[kMaxOutputs] = {};
  StepArgs args;  // the kernel family's sizes and constants (step_args.h)
  void* scratch = nullptr;
  void* state = nullptr;  // kernel-owned object: packed weight, RoPE table, attention work
  int32_t node = -1;      // graph node this step executes (diagnostics)
};

// Plans copy steps into a flat array and replay it: no destructor, no heap, no hidden state.
static_assert(std::is_trivially_copyable_v<Step>);
static_assert(kMaxSplitOutputs <= Step::kMaxOutputs, "matmul_split writes through Step::out");

}  // namespace kiln::graph
