#include "kiln/engine/graph_mode/graph_checker.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <limits>

#include "kiln/base/error.h"
#include "kiln/base/half.h"
#include "kiln/engine/graph_mode/graph_runner.h"
#include "kiln/engine/model_runner.h"
#include "kiln/graph/interpreter.h"
#include "kiln/graph/printer.h"
#include "kiln/kernels/dequant.h"

namespace kiln::engine {
namespace {

// The first `n` elements of `t` as doubles (plain dtypes read directly, quantized dtypes
// dequantized; `n` is a whole number of rows, so of quantization blocks).
std::vector<double> to_doubles(const Tensor& t, int64_t n) {
  std::vector<double> out(static_cast<size_t>(n));
  const void* p = t.data();
  switch (t.dtype()) {
    case DType::F32:
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<const float*>(p)[i];
      break;
    case DType::F16:
      for (int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(static_cast<const uint16_t*>(p)[i]);
      break;
    case DType::BF16:
      for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(static_cast<const uint16_t*>(p)[i]);
      break;
    case DType::I32:
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<const int32_t*>(p)[i];
      break;
    case DType::I8:
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<const int8_t*>(p)[i];
      break;
    default: {
      std::vector<float> f(static_cast<size_t>(n));
      kernels::dequantize_row(t.dtype(), p, f.data(), n);
      for (int64_t i = 0; i < n; ++i) out[i] = f[i];
    }
  }
  return out;
}

struct Diff {
  double max_abs = 0;
  bool beyond = false;
};

// Compares the first `n` elements of `got` (graph) with `want` (eager).
Diff compare(const Tensor& got, const Tensor& want, int64_t n, double atol, double rtol) {
  std::vector<double> g = to_doubles(got, n), w = to_doubles(want, n);
  Diff d;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(g[i]) || std::isnan(w[i])) {
      if (std::isnan(g[i]) != std::isnan(w[i])) {
        d.beyond = true;
        d.max_abs = std::numeric_limits<double>::infinity();
      }
      continue;
    }
    const double e = std::fabs(g[i] - w[i]);
    if (!(e <= atol + rtol * std::fabs(w[i]))) d.beyond = true;  // also catches inf - inf
    if (std::isnan(e)) continue;
    d.max_abs = std::max(d.max_abs, e);
  }
  return d;
}

// How many leading elements of a padded plan value (rows [0, bs)) correspond to the eager
// value (rows [0, live)), or -1 when the layouts are not comparable. Row-major: the live rows
// are the leading elements when only the outermost dimension differs.
int64_t comparable_prefix(const graph::ValueType& plan, const graph::ValueType& eager) {
  if (plan.dtype != eager.dtype || plan.shape.rank() != eager.shape.rank()) return -1;
  if (plan.shape == eager.shape) return eager.shape.numel();
  if (plan.shape.rank() == 0 || plan.shape[0] < eager.shape[0]) return -1;
  for (int i = 1; i < plan.shape.rank(); ++i) {
    if (plan.shape[i] != eager.shape[i]) return -1;
  }
  return eager.shape.numel();
}

}  // namespace

std::string GraphCheckResult::describe() const {
  std::string s = fmt::format("check-graph: step {}", step);
  if (ok()) {
    return s + fmt::format(
                   " OK ({} nodes of the replay plan match eager, max abs diff {:.3g}; optimized "
                   "outputs "
                   "max abs diff {:.3g})",
                   nodes_compared, replay_max_abs_diff, output_max_abs_diff);
  }
  if (first_divergence) {
    const NodeDivergence& d = *first_divergence;
    s += fmt::format(" first divergence at node %{} ({}) output {} {} max abs diff {:.6g}", d.node,
                     d.op, d.output, d.type, d.max_abs_diff);
  }
  if (!outputs_match) {
    s += fmt::format("{} optimized plan outputs differ from eager: max abs diff {:.6g}",
                     first_divergence ? ";" : "", output_max_abs_diff);
    if (greedy_rows_differing > 0)
      s += fmt::format(" ({} greedy ids differ)", greedy_rows_differing);
  }
  return s;
}

GraphChecker::GraphChecker(ModelRunner& runner, GraphRunner& graph, model::WeightStore& weights,
                           KvPool& pool, ThreadPool& threads, const GraphRunnerOptions& captured,
                           GraphCheckOptions options)
    : runner_(runner),
      graph_(graph),
      weights_(weights),
      pool_(pool),
      threads_(threads),
      options_(std::move(options)) {
  // The plans `graph` has (decode and verify), made again as traced.
  GraphRunnerOptions r = captured;
  r.optimize = false;  // the graph as traced: node i here is node i of the eager trace
  r.cache_dir = "";    // a diagnostic capture; never worth caching
  replay_ = std::make_unique<GraphRunner>(runner_, weights_, pool_, threads_, r);
  replay_->capture();
}

GraphChecker::~GraphChecker() = default;

GraphCheckResult GraphChecker::step(const StepBatch& batch, StepOutput& out) {
  GraphCheckResult res;
  res.step = ++steps_;

  // 1. Eager: every node's outputs stay alive (the interpreter gives each value a fresh buffer).
  model::ForwardShape shape = runner_.shape_of(batch);
  graph::Graph eager = runner_.trace(shape);
  ModelRunner::BoundInputs bound;
  runner_.bind(batch, shape, bound);
  graph::Interpreter interp(threads_, weights_, runner_.kv_geometry());
  std::vector<std::vector<Tensor>> values(eager.num_nodes());
  std::vector<Tensor> eager_out =
      interp.run(eager, bound.bindings,
                 [&](int node, const std::vector<Tensor>& outs) { values[node] = outs; });

  // 2. The replay-mode plan, node by node, each compared as soon as it has run.
  graph::Plan& plan = replay_->stage(batch);
  const graph::Graph& pg = plan.graph();
  const bool same_nodes = pg.num_nodes() == eager.num_nodes();
  plan.replay_stepwise(threads_, [&](int node) {
    if (res.first_divergence) return;  // report the first only; later ones follow from it
    const graph::Node& pn = pg.node(node);
    if (!same_nodes || eager.node(node).op != pn.op) {
      res.nodes_skipped += 1;
      return;
    }
    bool compared = false;
    for (size_t k = 0; k < pn.outputs.size(); ++k) {
      const graph::ValueType& pt = pn.outputs[k];
      if (pt.dtype == DType::Token) continue;
      const int64_t n = comparable_prefix(pt, eager.node(node).outputs[k]);
      if (n < 0 || k >= values[node].size()) continue;
      Tensor got = plan.value_view({node, static_cast<int32_t>(k)});
      Diff d = compare(got, values[node][k], n, options_.atol, options_.rtol);
      compared = true;
      res.replay_max_abs_diff = std::max(res.replay_max_abs_diff, d.max_abs);
      if (d.beyond && !res.first_divergence) {
        res.first_divergence =
            NodeDivergence{node, std::string(graph::op_name(pn.op)), graph::type_to_string(pt),
                           static_cast<int>(k), d.max_abs};
      }
    }
    (compared ? res.nodes_compared : res.nodes_skipped) += 1;
  });

  // 3. The optimized plan, exactly as without checking; its outputs against eager's.
  graph_.run(batch, out);
  const Tensor& want = eager_out.at(0);
  if (batch.greedy_only) {
    for (int64_t i = 0; i < want.numel(); ++i) {
      if (i >= static_cast<int64_t>(out.greedy_ids.size()) ||
          out.greedy_ids[i] != want.data_as<int32_t>()[i])
        res.greedy_rows_differing += 1;
    }
    res.outputs_match = res.greedy_rows_differing == 0;
    res.output_max_abs_diff = res.outputs_match ? 0 : std::numeric_limits<double>::infinity();
  } else {
    KILN_CHECK(static_cast<int64_t>(out.logits.size()) == want.numel(),
               "graph logits have {} values, eager {}", out.logits.size(), want.numel());
    Tensor got = Tensor::borrow(DType::F32, want.shape(), out.logits.data());
    Diff d = compare(got, want, want.numel(), options_.atol, options_.rtol);
    res.outputs_match = !d.beyond;
    res.output_max_abs_diff = d.max_abs;
  }

  if (!res.ok()) failed_ += 1;
  const std::string line = res.describe();
  if (options_.report) {
    options_.report(line);
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
  return res;
}

bool GraphChecker::try_run(const StepBatch& batch, StepOutput& out) {
  if (!graph_.can_run(batch)) return false;
  step(batch, out);
  return true;
}

}  // namespace kiln::engine
