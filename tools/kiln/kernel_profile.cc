#include "kernel_profile.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "kiln/base/error.h"

namespace kiln::cli {

KernelProfile profile_kernels(const graph::Graph& graph,
                              const std::vector<graph::Binding>& bindings, ThreadPool& pool,
                              graph::WeightProvider& weights, const graph::KvGeometry& kv,
                              int repeats) {
  using graph::Node;
  using graph::Op;
  const int n = graph.num_nodes();
  // Buffers for every value, as the interpreter makes them (interpreter.cc).
  std::vector<std::vector<Tensor>> values(n);
  for (int i = 0; i < n; ++i) {
    const Node& node = graph.node(i);
    if (node.op == Op::Input || node.op == Op::State) {
      const std::string& name = node.attrs.get_str("name");
      auto it = std::find_if(bindings.begin(), bindings.end(),
                             [&](const auto& b) { return b.name == name; });
      KILN_CHECK(it != bindings.end(), "graph input '{}' is not bound", name);
      values[i] = {it->tensor};
    } else if (node.op == Op::Param) {
      continue;
    } else if (graph::output_is_view(node)) {
      const Tensor& in = values[node.inputs[0].node][node.inputs[0].index];
      for (const auto& t : node.outputs)
        values[i].push_back(t.dtype == DType::Token ? in : in.reshaped(t.shape));
    } else {
      for (const auto& t : node.outputs) {
        values[i].push_back(t.dtype == DType::Token ? Tensor() : Tensor::empty(t.dtype, t.shape));
      }
      // Mutating ops pass the state buffer on through their token output.
      for (size_t k = 0; k < node.outputs.size(); ++k) {
        if (node.outputs[k].dtype != DType::Token) continue;
        for (const graph::Value& in : node.inputs) {
          if (graph.type(in).dtype == DType::Token || graph.node(in.node).op == Op::State)
            values[i][k] = values[in.node][in.index];
        }
      }
    }
  }

  graph::LowerContext ctx;
  ctx.graph = &graph;
  ctx.weights = &weights;
  ctx.kv = kv;
  ctx.n_threads = pool.size();
  ctx.buffer = [&](graph::Value v) -> void* { return values[v.node][v.index].data(); };
  std::vector<graph::Lowered> steps;
  std::vector<Tensor> scratch;
  for (int i = 0; i < n; ++i) {
    const Node& node = graph.node(i);
    if (node.is_source() || graph::output_is_view(node)) continue;
    steps.push_back(graph::lower_node(ctx, i));
    if (steps.back().scratch_bytes > 0) {
      scratch.push_back(
          Tensor::empty(DType::I8, {static_cast<int64_t>(steps.back().scratch_bytes)}));
      steps.back().step.scratch = scratch.back().data();
    }
  }

  using clock = std::chrono::steady_clock;
  KernelProfile profile;
  profile.kernels = static_cast<int>(steps.size());
  // Each kernel's best time over the repeats: the machine is shared, and a sum of per-run
  // totals would carry every interruption of every kernel.
  std::vector<double> best(steps.size(), std::numeric_limits<double>::infinity());
  SpinBarrier barrier(pool.size());
  for (int r = 0; r < std::max(1, repeats); ++r) {
    for (size_t i = 0; i < steps.size(); ++i) {
      graph::Step& step = steps[i].step;
      if (step.update != nullptr) step.update(step, pool.size());  // host work: not kernel time
      clock::time_point t0, t1;
      barrier.reset(pool.size());
      pool.run([&](int tid, int nth) {
        kernels::ExecContext ectx{tid, nth, nth > 1 ? &barrier : nullptr};
        ectx.sync();
        if (tid == 0) t0 = clock::now();
        step.run(step, ectx);
        ectx.sync();
        if (tid == 0) t1 = clock::now();
      });
      best[i] = std::min(best[i], std::chrono::duration<double>(t1 - t0).count());
    }
  }
  for (double b : best) profile.kernel_seconds += b;
  return profile;
}

}  // namespace kiln::cli
