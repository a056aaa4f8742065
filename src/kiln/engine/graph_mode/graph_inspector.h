// What `kiln graph` shows, computed without loading weights: the decode graph traced from the
// GGUF metadata and tensor infos alone (dtypes and shapes), the pass pipeline over it with
// per-pass statistics, the memory plan of the resulting plan, and the dependency-level
// schedule before and after the passes. Opening the file maps it but reads no tensor data, so
// this takes well under a second even for large models.
#pragma once
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/graph/ir.h"
#include "kiln/graph/memory_planner.h"
#include "kiln/graph/passes/pipeline.h"
#include "kiln/graph/schedule.h"
#include "kiln/kernels/kv_cache.h"

namespace kiln::engine {

struct GraphInspectOptions {
  std::string model_path;  // required (the CLI supplies its default model)
  int batch_size = 1;      // decode rows (B)
  bool greedy = false;     // greedy plan (argmax ids) instead of a logits plan
  bool optimize = true;    // false: the replay-mode pipeline (analyses only, no rewrites)
  // The KV pool geometry (serving_geometry.h), as `kiln run` / `kiln serve` size it.
  int page_size = 16;
  int64_t kv_tokens = 0;   // 0: Runtime's default
  int context_length = 0;  // 0: the model's, capped by the pool
  kernels::KvDtype kv_dtype = kernels::KvDtype::F16;
  // Called after each pass with the graph as that pass left it (--print-after).
  std::function<void(std::string_view pass, const graph::Graph&)> after_pass;
};

struct GraphInspection {
  std::string model_path;
  std::string model_name;
  std::string architecture;
  graph::Graph traced;     // as the model code recorded it
  graph::Graph optimized;  // after the pipeline
  std::vector<graph::PassStats> passes;
  graph::MemoryPlan memory;  // of `optimized`, planned exactly as Plan::prepare plans it
  graph::ScheduleStats schedule_before;
  graph::ScheduleStats schedule_after;
  double trace_ms = 0;
  double pipeline_ms = 0;
};

GraphInspection inspect_graph(const GraphInspectOptions& options);

}  // namespace kiln::engine
