#include "kernel_profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>

#include "kiln/base/error.h"
#include "kiln/kernels/packed_weight.h"

namespace kiln::cli {
namespace {

// Bytes of the packed weight a matmul-family node streams (its Param input), 0 for other ops.
double matmul_weight_bytes(const graph::Graph& graph, const graph::Node& node,
                           graph::WeightProvider& weights) {
  using graph::Op;
  if (node.op == Op::MoeFfn) {  // the router and every expert (a step reads the used ones)
    auto param = [&](int i) { return &graph.node(node.inputs[i].node); };
    return static_cast<double>(weights.packed(*param(1)).bytes() +
                               weights.packed_experts({param(2), param(3)}).bytes() +
                               weights.packed_experts({param(4)}).bytes());
  }
  if (node.op != Op::Matmul && node.op != Op::MatmulAdd && node.op != Op::MatmulSplit &&
      node.op != Op::NormMatmulArgmax)
    return 0;
  const graph::Value w = node.inputs[node.op == Op::NormMatmulArgmax ? 2 : 1];
  const graph::Node& param = graph.node(w.node);
  if (param.op != Op::Param) return 0;
  return static_cast<double>(weights.packed(param).bytes());
}

}  // namespace

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
  std::vector<int> step_node;
  std::vector<Tensor> scratch;
  for (int i = 0; i < n; ++i) {
    const Node& node = graph.node(i);
    if (node.is_source() || graph::output_is_view(node)) continue;
    steps.push_back(graph::lower_node(ctx, i));
    step_node.push_back(i);
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
  std::map<std::string, OpKernelTime> ops;
  for (size_t i = 0; i < steps.size(); ++i) {
    profile.kernel_seconds += best[i];
    const Node& node = graph.node(step_node[i]);
    OpKernelTime& o = ops[std::string(graph::op_name(node.op))];
    o.op = std::string(graph::op_name(node.op));
    o.count += 1;
    o.seconds += best[i];
    o.weight_bytes += matmul_weight_bytes(graph, node, weights);
  }
  for (auto& [name, o] : ops) profile.by_op.push_back(o);
  std::sort(profile.by_op.begin(), profile.by_op.end(),
            [](const auto& a, const auto& b) { return a.seconds > b.seconds; });
  return profile;
}

std::string format_op_profile(const KernelProfile& p) {
  std::string out = fmt::format("{:<24} {:>5} {:>9} {:>6} {:>9} {:>7}\n", "op", "nodes", "ms",
                                "share", "weight MB", "GB/s");
  for (const auto& o : p.by_op) {
    out += fmt::format("{:<24} {:>5} {:>9.3f} {:>5.1f}% ", o.op, o.count, 1e3 * o.seconds,
                       100.0 * o.seconds / std::max(p.kernel_seconds, 1e-12));
    if (o.weight_bytes > 0) {
      out += fmt::format("{:>9.1f} {:>7.1f}\n", o.weight_bytes / 1e6,
                         o.weight_bytes / std::max(o.seconds, 1e-12) / 1e9);
    } else {
      out += fmt::format("{:>9} {:>7}\n", "-", "-");
    }
  }
  return out;
}

}  // namespace kiln::cli
