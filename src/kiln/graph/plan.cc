#include "kiln/graph/plan.h"

#include <algorithm>
#include <cstring>

#include "kiln/base/error.h"
#include "kiln/graph/interpreter.h"
#include "kiln/graph/schedule.h"

namespace kiln::graph {

std::unique_ptr<Plan> Plan::prepare(Graph graph, const PlanOptions& options,
                                    std::optional<MemoryPlan> memory) {
  std::unique_ptr<Plan> plan(new Plan());
  plan->graph_ = std::move(graph);
  plan->options_ = options;
  const Graph& g = plan->graph_;
  if (memory) {
    plan->memory_ = std::move(*memory);
  } else {
    // Nodes of a level run concurrently: liveness is measured in levels.
    std::vector<int> time = node_levels(g);
    plan->memory_ = plan_memory(g, dense_byte_size, 64, &time);
  }
  KILN_CHECK(static_cast<int>(plan->memory_.index.size()) == g.num_nodes(),
             "memory plan is for another graph ({} nodes, graph has {})",
             plan->memory_.index.size(), g.num_nodes());
  // Static input buffers: their addresses are baked into the steps, so the caller copies the
  // live rows of each step's inputs here (or writes them here directly).
  plan->input_of_node_.assign(g.num_nodes(), -1);
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    if (n.op != Op::Input) continue;
    plan->input_of_node_[i] = static_cast<int>(plan->inputs_.size());
    plan->inputs_.push_back({n.attrs.get_str("name"), n.outputs[0],
                             Tensor::empty(n.outputs[0].dtype, n.outputs[0].shape)});
  }
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const Value v = g.outputs()[i];
    const ValueType& t = g.type(v);
    // Placed by bind(): in a region shared with other plans, or allocated then.
    plan->outputs_.push_back({"output" + std::to_string(i), t, Tensor()});
    // A returned reshape has no step of its own: the bytes are its root value's.
    Value root = v;
    while (output_is_view(g.node(root.node))) root = g.node(root.node).inputs[0];
    const Op root_op = g.node(root.node).op;
    KILN_CHECK(t.dtype != DType::Token && root_op != Op::Param && root_op != Op::State,
               "graph output {} is {} {}: plans return computed values and inputs only", i,
               root == v ? "a" : "a view of a", op_name(root_op));
    if (root == v || root_op == Op::Input) continue;
    const bool returned =
        std::find(g.outputs().begin(), g.outputs().end(), root) != g.outputs().end();
    const bool homed = std::any_of(plan->view_home_.begin(), plan->view_home_.end(),
                                   [&](const auto& h) { return h.first == root; });
    if (!returned && !homed) plan->view_home_.push_back({root, static_cast<int>(i)});
  }
  return plan;
}

PlanBuffer* Plan::find_input(std::string_view name) {
  for (auto& b : inputs_) {
    if (b.name == name) return &b;
  }
  return nullptr;
}

PlanBuffer& Plan::input(std::string_view name) {
  PlanBuffer* b = find_input(name);
  KILN_CHECK(b != nullptr, "plan has no input '{}'", name);
  return *b;
}

void* Plan::address_of(Value v) {
  const Node& n = graph_.node(v.node);
  if (n.op == Op::Input) return inputs_[input_of_node_[v.node]].tensor.data();
  if (n.op == Op::State) return kv_pool_;
  for (size_t i = 0; i < graph_.outputs().size(); ++i) {
    if (graph_.outputs()[i] == v) return outputs_[i].tensor.data();
  }
  if (n.outputs[v.index].dtype == DType::Token) {
    // A token stands for the state it was threaded from.
    for (const Value& in : n.inputs) {
      if (graph_.type(in).dtype == DType::Token || graph_.node(in.node).op == Op::State)
        return address_of(in);
    }
  }
  if (output_is_view(n)) return address_of(n.inputs[0]);
  for (const auto& [root, i] : view_home_) {
    if (root == v) return outputs_[i].tensor.data();
  }
  const PlannedBuffer* b = memory_.find(v);
  KILN_CHECK(b != nullptr, "value %{}:{} ({}) has no buffer in the memory plan", v.node, v.index,
             op_name(n.op));
  return arena_ + b->offset;
}

void* Plan::produced_at(int i) {
  const Value v = graph_.outputs()[i];
  for (int j = 0; j < i; ++j) {
    if (graph_.outputs()[j] == v) return outputs_[j].tensor.data();
  }
  const Node& n = graph_.node(v.node);
  return output_is_view(n) ? address_of(n.inputs[0]) : address_of(v);
}

void Plan::copy_outputs(int tid, int nth) const {
  for (size_t k = tid; k < output_copies_.size(); k += nth)
    std::memcpy(output_copies_[k].to, output_copies_[k].from, output_copies_[k].bytes);
}

size_t Plan::output_bytes() const {
  size_t bytes = 0;
  for (const PlanBuffer& b : outputs_)
    bytes += (dtype_bytes(b.type.dtype, b.type.shape.numel()) + 63) / 64 * 64;
  return bytes;
}

void Plan::bind(void* arena, WeightProvider& weights, const KvGeometry& kv, void* kv_pool,
                int n_threads, const PlanSharing& sharing) {
  arena_ = static_cast<char*>(arena);
  kv_pool_ = kv_pool;
  size_t output_offset = 0;
  for (PlanBuffer& b : outputs_) {
    if (sharing.outputs != nullptr) {
      b.tensor = Tensor::borrow(b.type.dtype, b.type.shape,
                                static_cast<char*>(sharing.outputs) + output_offset);
      output_offset += (b.tensor.nbytes() + 63) / 64 * 64;
    } else if (outputs_shared_ || !b.tensor.defined()) {
      b.tensor = Tensor::empty(b.type.dtype, b.type.shape);
    }
  }
  outputs_shared_ = sharing.outputs != nullptr;
  steps_.clear();
  owned_.clear();
  scratch_offset_.clear();
  scratch_bytes_ = 0;
  hook_steps_.clear();
  level_end_.clear();

  LowerContext ctx;
  ctx.graph = &graph_;
  ctx.weights = &weights;
  ctx.kv = kv;
  ctx.n_threads = n_threads;
  ctx.buffer = [this](Value v) { return address_of(v); };
  ctx.shared = sharing.lowering;

  std::vector<std::vector<int>> levels = schedule_levels(graph_);
  placement_.clear();
  group_barriers_.clear();
  stats_.grouped_levels = 0;
  for (const auto& level : levels) {
    const int level_first_step = static_cast<int>(steps_.size());
    std::vector<int> level_nodes;
    size_t level_scratch = 0;
    for (int node : level) {
      const Node& n = graph_.node(node);
      if (n.is_source() || output_is_view(n)) continue;
      Lowered l = lower_node(ctx, node);
      if (l.scratch_bytes > 0) {
        // Steps of one level run concurrently, so each gets a range of its own.
        scratch_offset_.push_back(static_cast<int64_t>(level_scratch));
        level_scratch += (l.scratch_bytes + 63) / 64 * 64;
      } else {
        scratch_offset_.push_back(-1);
      }
      if (l.step.update != nullptr) hook_steps_.push_back(static_cast<int>(steps_.size()));
      steps_.push_back(l.step);
      placement_.push_back({0, n_threads, -1});
      level_nodes.push_back(node);
      if (l.owned) owned_.push_back(std::move(l.owned));
      if (!options_.level_barriers) level_end_.push_back(static_cast<int>(steps_.size()));
    }
    scratch_bytes_ = std::max(scratch_bytes_, level_scratch);
    if (options_.level_barriers && options_.worker_groups && level_nodes.size() > 1 &&
        n_threads > 1)
      place_level(level_first_step, level_nodes, n_threads);
    if (options_.level_barriers &&
        (level_end_.empty() || level_end_.back() != static_cast<int>(steps_.size())))
      level_end_.push_back(static_cast<int>(steps_.size()));
  }
  output_copies_.clear();
  for (size_t i = 0; i < outputs_.size(); ++i) {
    void* from = produced_at(static_cast<int>(i));
    if (from != outputs_[i].tensor.data())
      output_copies_.push_back({from, outputs_[i].tensor.data(), outputs_[i].tensor.nbytes()});
  }
  barrier_.reset(n_threads);
  barrier_participants_ = n_threads;
  stats_.steps = static_cast<int>(steps_.size());
  stats_.barriers = static_cast<int>(level_end_.size());
  stats_.barriers_unfused = stats_.steps;
  stats_.update_hooks = static_cast<int>(hook_steps_.size());
  stats_.arena_bytes = memory_.arena_bytes;
  stats_.planned_bytes = memory_.planned_bytes;
}

// Rough cost of a node: bytes it reads and writes (weights included). Decode is bound by
// memory traffic, so bytes predict time well enough to balance worker groups.
double Plan::cost_of(int node) const {
  const Node& n = graph_.node(node);
  double bytes = 0;
  auto add = [&](const ValueType& t) {
    if (t.dtype != DType::Token)
      bytes += static_cast<double>(dtype_bytes(t.dtype, t.shape.numel()));
  };
  for (const Value& in : n.inputs) {
    if (graph_.node(in.node).op != Op::State) add(graph_.type(in));
  }
  for (const auto& t : n.outputs) add(t);
  if (n.op == Op::MoeFfn) {
    // A step reads only the experts its rows route to: at most rows * top_k of n_experts.
    const double rows = static_cast<double>(graph_.type(n.inputs[0]).shape.rows());
    const double used = std::min(1.0, rows * static_cast<double>(n.attrs.get_int("top_k")) /
                                          static_cast<double>(n.attrs.get_int("n_experts")));
    for (int i = 2; i <= 4; ++i) {
      const ValueType& t = graph_.type(n.inputs[i]);
      bytes -= (1.0 - used) * static_cast<double>(dtype_bytes(t.dtype, t.shape.numel()));
    }
  }
  return bytes;
}

void Plan::place_level(int first_step, const std::vector<int>& nodes, int n_threads) {
  std::vector<double> costs;
  double total = 0;
  for (int node : nodes) {
    costs.push_back(cost_of(node));
    total += costs.back();
  }
  std::vector<WorkerGroup> groups = split_workers(costs, n_threads);
  // Time if each node runs on all threads one after another, vs on its own group.
  const double sequential = total / n_threads;
  std::vector<double> load(n_threads, 0.0);
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (int t = groups[i].first; t < groups[i].first + groups[i].count; ++t)
      load[t] += costs[i] / groups[i].count;
  }
  const double grouped = *std::max_element(load.begin(), load.end());
  if (!(grouped < options_.group_threshold * sequential))
    return;  // not worth splitting (the usual case at 2 threads)
  for (size_t i = 0; i < nodes.size(); ++i) {
    Placement& p = placement_[first_step + i];
    p.first = groups[i].first;
    p.count = groups[i].count;
    if (p.count > 1) {
      group_barriers_.push_back(std::make_unique<SpinBarrier>(p.count));
      p.barrier = static_cast<int>(group_barriers_.size()) - 1;
    }
  }
  ++stats_.grouped_levels;
}

void Plan::set_scratch(void* scratch) {
  for (size_t i = 0; i < steps_.size(); ++i) {
    steps_[i].scratch =
        scratch_offset_[i] >= 0 ? static_cast<char*>(scratch) + scratch_offset_[i] : nullptr;
  }
}

void Plan::check_state(const void* kv_pool) const {
  KILN_CHECK(kv_pool == kv_pool_,
             "the KV pool moved since capture ({} vs {}); plans must be recaptured", kv_pool,
             kv_pool_);
}

void Plan::replay(ThreadPool& pool) { replay_levels<true>(pool); }

void Plan::replay_host_only(ThreadPool& pool) { replay_levels<false>(pool); }

template <bool kRunKernels>
void Plan::replay_levels(ThreadPool& pool) {
  const int nth = pool.size();
  KILN_CHECK(nth == static_cast<int>(barrier_participants_),
             "plan captured for {} threads, replayed on {}", barrier_participants_, nth);
  // Replay-time updates: host values (sequence lengths) re-partition attention's work for the
  // threads of its group.
  for (int i : hook_steps_) steps_[i].update(steps_[i], placement_[i].count);
  pool.run([this](int tid, int n) {
    kernels::ExecContext all{tid, n, n > 1 ? &barrier_ : nullptr};
    int step = 0;
    for (int end : level_end_) {
      for (; step < end; ++step) {
        const Placement& p = placement_[step];
        if (p.count == n) {
          if constexpr (kRunKernels) steps_[step].run(steps_[step], all);
        } else if (tid >= p.first && tid < p.first + p.count) {
          if constexpr (kRunKernels) {
            kernels::ExecContext group{tid - p.first, p.count,
                                       p.barrier >= 0 ? group_barriers_[p.barrier].get() : nullptr};
            steps_[step].run(steps_[step], group);
          }
        }
      }
      all.sync();
    }
    copy_outputs(tid, n);
  });
}

void Plan::replay_stepwise(ThreadPool& pool, const std::function<void(int node)>& after_step) {
  for (Step& step : steps_) {
    run_step_on_pool(pool, step, barrier_);
    if (after_step) after_step(step.node);
  }
  copy_outputs(0, 1);
}

Tensor Plan::value_view(Value v) {
  const ValueType& t = graph_.type(v);
  return Tensor::borrow(t.dtype, t.shape, address_of(v));
}

}  // namespace kiln::graph
