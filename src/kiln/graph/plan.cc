#include "kiln/graph/plan.h"

#include <algorithm>

#include "kiln/base/error.h"
#include "kiln/graph/schedule.h"

namespace kiln::graph {

std::unique_ptr<Plan> Plan::prepare(Graph graph, const PlanOptions& options, std::optional<MemoryPlan> memory) {
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
             "memory plan is for another graph ({} nodes, graph has {})", plan->memory_.index.size(), g.num_nodes());
  // Static input buffers: their addresses are baked into the steps, so the caller copies the
  // live rows of each step's inputs here (or writes them here directly).
  plan->input_of_node_.assign(g.num_nodes(), -1);
  for (int i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(i);
    if (n.op != Op::Input) continue;
    plan->input_of_node_[i] = static_cast<int>(plan->inputs_.size());
    plan->inputs_.push_back({n.attrs.get_str("name"), n.outputs[0], Tensor::empty(n.outputs[0].dtype, n.outputs[0].shape)});
  }
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const ValueType& t = g.type(g.outputs()[i]);
    plan->outputs_.push_back({"output" + std::to_string(i), t, Tensor::empty(t.dtype, t.shape)});
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
      if (graph_.type(in).dtype == DType::Token || graph_.node(in.node).op == Op::State) return address_of(in);
    }
  }
  if (output_is_view(n)) return address_of(n.inputs[0]);
  const PlannedBuffer* b = memory_.find(v);
  KILN_CHECK(b != nullptr, "value %{}:{} ({}) has no buffer in the memory plan", v.node, v.index, op_name(n.op));
  return arena_ + b->offset;
}

void Plan::bind(void* arena, WeightProvider& weights, const KvGeometry& kv, void* kv_pool, int n_threads) {
  arena_ = static_cast<char*>(arena);
  kv_pool_ = kv_pool;
  steps_.clear();
  owned_.clear();
  scratch_.clear();
  hook_steps_.clear();
  level_end_.clear();

  LowerContext ctx;
  ctx.graph = &graph_;
  ctx.weights = &weights;
  ctx.kv = kv;
  ctx.n_threads = n_threads;
  ctx.buffer = [this](Value v) { return address_of(v); };

  std::vector<std::vector<int>> levels = schedule_levels(graph_);
  for (const auto& level : levels) {
    for (int node : level) {
      const Node& n = graph_.node(node);
      if (n.is_source() || output_is_view(n)) continue;
      Lowered l = lower_node(ctx, node);
      if (l.scratch_bytes > 0) {
        // Steps of one level run concurrently, so each gets scratch of its own. Scratch is
        // small (quantized activations, attention partials) next to the arena.
        scratch_.push_back(Tensor::empty(DType::I8, {static_cast<int64_t>(l.scratch_bytes)}));
        l.step.scratch = scratch_.back().data();
      }
      if (l.step.update != nullptr) hook_steps_.push_back(static_cast<int>(steps_.size()));
      steps_.push_back(l.step);
      if (l.owned) owned_.push_back(std::move(l.owned));
      if (!options_.level_barriers) level_end_.push_back(static_cast<int>(steps_.size()));
    }
    if (options_.level_barriers && (level_end_.empty() || level_end_.back() != static_cast<int>(steps_.size())))
      level_end_.push_back(static_cast<int>(steps_.size()));
  }
  barrier_.reset(n_threads);
  stats_.steps = static_cast<int>(steps_.size());
  stats_.barriers = static_cast<int>(level_end_.size());
  stats_.barriers_unfused = stats_.steps;
  stats_.update_hooks = static_cast<int>(hook_steps_.size());
  stats_.arena_bytes = memory_.arena_bytes;
  stats_.planned_bytes = memory_.planned_bytes;
}

void Plan::check_state(const void* kv_pool) const {
  KILN_CHECK(kv_pool == kv_pool_, "the KV pool moved since capture ({} vs {}); plans must be recaptured",
             kv_pool, kv_pool_);
}

void Plan::replay(ThreadPool& pool) {
  const int nth = pool.size();
  // Replay-time updates: host values (sequence lengths) re-partition attention's work.
  for (int i : hook_steps_) steps_[i].update(steps_[i], nth);
  barrier_.reset(nth);
  pool.run([this](int tid, int n) {
    kernels::ExecContext ctx{tid, n, n > 1 ? &barrier_ : nullptr};
    int step = 0;
    for (int end : level_end_) {
      for (; step < end; ++step) steps_[step].run(steps_[step], ctx);
      ctx.sync();
    }
  });
}

}  // namespace kiln::graph
