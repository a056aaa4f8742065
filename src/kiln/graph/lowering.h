// Lowering: node -> Step. Chooses the kernel variant for the node's exact shapes and dtypes,
// precomputes everything shape-dependent (RoPE frequency tables, attention work capacity,
// scratch sizes, weight packing) and resolves every pointer through `LowerContext`.
// Both execution modes use it: the interpreter per node per run (that per-step work is part
// of what eager mode pays), plans once at capture.
#pragma once
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "kiln/graph/ir.h"
#include "kiln/graph/step.h"
#include "kiln/graph/weight_provider.h"
#include "kiln/kernels/kv_cache.h"

namespace kiln::graph {

// Geometry of the paged KV pool (the graph's single state input); kernels/kv_cache.h owns it
// and the layout it implies.
using KvGeometry = kernels::KvGeometry;

// Kernel objects that the plans of one runner share because only one plan runs at a time and
// every replay refreshes them before use (attention's work lists, refilled by its update hook).
// Each plan would otherwise hold its own: ~200 KB per attention node, 18 per Gemma 3 plan.
// Objects are keyed by what they are for (node, sizes), so two steps of ONE plan never share.
class SharedLowering {
 public:
  // `max_tokens`: the most rows a plan sharing these objects has (the largest batch).
  explicit SharedLowering(int64_t max_tokens) : max_tokens_(max_tokens) {}
  int64_t max_tokens() const { return max_tokens_; }
  // The object stored under `key`, made by `make` on first use.
  template <typename T, typename Make>
  std::shared_ptr<T> get(const std::string& key, Make&& make) {
    auto [it, fresh] = objects_.try_emplace(key);
    if (fresh) it->second = std::shared_ptr<T>(make());
    return std::static_pointer_cast<T>(it->second);
  }
  size_t size() const { return objects_.size(); }

 private:
  int64_t max_tokens_;
  std::map<std::string, std::shared_ptr<void>> objects_;
};

struct LowerContext {
  const Graph* graph = nullptr;
  WeightProvider* weights = nullptr;
  KvGeometry kv;
  int n_threads = 1;
  // Address of a non-param value (activation, graph input, state). Params go through weights.
  std::function<void*(Value)> buffer;
  // Plans of a runner share kernel objects through this; null (the interpreter, a lone plan):
  // every step owns its own.
  SharedLowering* shared = nullptr;
};

struct Lowered {
  Step step;
  size_t scratch_bytes = 0;
  // Objects the step points into (tables, work lists); must live as long as the step.
  std::shared_ptr<void> owned;
  // Reshape/view/token ops: nothing to run, the output is the input's buffer.
  bool is_view = false;
};

Lowered lower_node(const LowerContext& ctx, int node_index);

// Whether node's output occupies no buffer of its own (reshape: aliases input 0; tokens).
bool output_is_view(const Node& node);

}  // namespace kiln::graph
