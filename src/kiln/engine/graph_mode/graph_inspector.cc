#include "kiln/engine/graph_mode/graph_inspector.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "kiln/base/error.h"
#include "kiln/engine/serving_geometry.h"
#include "kiln/graph/plan.h"
#include "kiln/model/fused_tensors.h"
#include "kiln/model/model_config.h"
#include "kiln/model/model_files.h"
#include "kiln/model/transformer.h"
#include "kiln/model/weight_store.h"

namespace kiln::engine {

GraphInspection inspect_graph(const GraphInspectOptions& o) {
  KILN_CHECK(o.batch_size >= 1 && o.batch_size <= 4096, "batch size {} out of range [1, 4096]",
             o.batch_size);
  GraphInspection r;
  KILN_CHECK(!o.model_path.empty(), "no model path given");
  r.model_path = o.model_path;
  model::ModelFiles files = model::open_model_files(r.model_path);
  const model::ModelConfig& config = files.config;
  r.architecture = config.arch;
  r.model_name = files.name;
  // The store answers dtype/shape lookups from the tensor infos; nothing is read or packed.
  model::WeightStore weights(files.tensors, model::fused_tensor_slices(config));

  const ServingGeometry geometry =
      derive_serving_geometry(config, {o.kv_tokens, o.context_length, o.page_size, o.kv_dtype});
  const model::ForwardShape shape = geometry.forward_shape(o.batch_size, o.batch_size, o.greedy);

  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  r.traced = model::build_forward(config, weights.lookup(), shape, "decode");
  auto t1 = clock::now();
  r.optimized = r.traced;
  graph::PipelineOptions popts;
  popts.rewrites = o.optimize;
  popts.after_pass = o.after_pass;
  r.passes = graph::run_pipeline(r.optimized, popts);
  auto t2 = clock::now();
  r.trace_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
  r.pipeline_ms = std::chrono::duration<double, std::milli>(t2 - t1).count();

  r.memory = graph::Plan::prepare(r.optimized, graph::PlanOptions{})->memory();
  r.schedule_before = graph::schedule_stats(graph::schedule_levels(r.traced));
  r.schedule_after = graph::schedule_stats(graph::schedule_levels(r.optimized));
  return r;
}

}  // namespace kiln::engine
