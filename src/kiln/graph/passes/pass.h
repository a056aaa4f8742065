// What every pass returns and takes. A pass is `PassResult run_<pass>(Graph&, const
// PassOptions&)`: it rewrites the graph in place and reports whether it changed anything plus
// named counters (nodes_removed, patterns_fused, ...). Passes keep the graph valid (verify()).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kiln/graph/ir.h"

namespace kiln::graph {

struct PassOptions {
  // Nothing tunes the passes yet; the struct keeps the signature stable when something does.
};

struct PassResult {
  bool changed = false;
  std::vector<std::pair<std::string, int64_t>> counters;  // in first-counted order

  // Adds n to a counter (creating it when n > 0); any positive count marks the result changed.
  void count(std::string_view name, int64_t n = 1) {
    if (n <= 0) return;
    changed = true;
    for (auto& [k, v] : counters) {
      if (k == name) {
        v += n;
        return;
      }
    }
    counters.emplace_back(std::string(name), n);
  }
  int64_t counter(std::string_view name) const {
    for (const auto& [k, v] : counters) {
      if (k == name) return v;
    }
    return 0;
  }
};

using PassFn = PassResult (*)(Graph&, const PassOptions&);

}  // namespace kiln::graph
