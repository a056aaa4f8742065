#include "kiln/graph/interpreter.h"

#include "kiln/base/error.h"

namespace kiln::graph {

void run_step_on_pool(ThreadPool& pool, Step& step, SpinBarrier& barrier) {
  if (step.update != nullptr) step.update(step, pool.size());
  barrier.reset(pool.size());
  pool.run([&](int tid, int nth) {
    kernels::ExecContext ctx{tid, nth, nth > 1 ? &barrier : nullptr};
    step.run(step, ctx);
  });
}

std::vector<Tensor> Interpreter::run(const Graph& graph, const std::vector<Binding>& bindings,
                                     const NodeObserver& observer) {
  const int n = graph.num_nodes();
  std::vector<std::vector<Tensor>> values(n);
  for (int i = 0; i < n; ++i) {
    const Node& node = graph.node(i);
    if (node.op != Op::Input && node.op != Op::State) continue;
    const std::string& name = node.attrs.get_str("name");
    const Binding* found = nullptr;
    for (const auto& b : bindings) {
      if (b.name == name) found = &b;
    }
    KILN_CHECK(found != nullptr, "graph input '{}' is not bound", name);
    const ValueType& want = node.outputs[0];
    KILN_CHECK(found->tensor.dtype() == want.dtype && found->tensor.shape() == want.shape,
               "graph input '{}' is {}{}, the graph expects {}{}", name,
               dtype_name(found->tensor.dtype()), found->tensor.shape().str(),
               dtype_name(want.dtype), want.shape.str());
    values[i] = {found->tensor};
  }

  LowerContext ctx;
  ctx.graph = &graph;
  ctx.weights = &weights_;
  ctx.kv = kv_;
  ctx.n_threads = pool_.size();
  ctx.buffer = [&](Value v) -> void* { return values[v.node][v.index].data(); };

  // The last node reading each value; graph outputs are read "after the end".
  std::vector<int> last_reader(n, -1);
  for (int i = 0; i < n; ++i)
    for (const Value& in : graph.node(i).inputs) last_reader[in.node] = i;
  for (const Value& v : graph.outputs()) last_reader[v.node] = n;

  SpinBarrier barrier(pool_.size());
  for (int i = 0; i < n; ++i) {
    const Node& node = graph.node(i);
    if (node.is_source()) continue;
    auto& outs = values[i];
    if (output_is_view(node)) {
      // reshape: same bytes; tokens: no storage (they carry the state's address along).
      const Tensor& in = values[node.inputs[0].node][node.inputs[0].index];
      for (const auto& t : node.outputs) {
        outs.push_back(t.dtype == DType::Token ? in : in.reshaped(t.shape));
      }
    } else {
      for (const auto& t : node.outputs) {
        outs.push_back(t.dtype == DType::Token ? Tensor()
                                               : BufferCache::allocate(buffers_, t.dtype, t.shape));
      }
      // Mutating ops pass the state buffer on through their token output.
      for (size_t k = 0; k < node.outputs.size(); ++k) {
        if (node.outputs[k].dtype == DType::Token) {
          for (const Value& in : node.inputs) {
            const ValueType& it = graph.type(in);
            if (it.dtype == DType::Token || graph.node(in.node).op == Op::State)
              outs[k] = values[in.node][in.index];
          }
        }
      }
      Lowered lowered = lower_node(ctx, i);
      Tensor scratch;
      if (lowered.scratch_bytes > 0) {
        scratch = BufferCache::allocate(buffers_, DType::I8,
                                        {static_cast<int64_t>(lowered.scratch_bytes)});
        lowered.step.scratch = scratch.data();
      }
      run_step_on_pool(pool_, lowered.step, barrier);
    }
    if (observer) observer(i, outs);
    // Inputs read for the last time go back to the cache (views keep their root alive).
    for (const Value& in : node.inputs) {
      if (last_reader[in.node] == i) values[in.node].clear();
    }
    if (last_reader[i] < 0) outs.clear();  // nobody reads it
  }

  std::vector<Tensor> results;
  for (const Value& v : graph.outputs()) results.push_back(values[v.node][v.index]);
  return results;
}

}  // namespace kiln::graph
