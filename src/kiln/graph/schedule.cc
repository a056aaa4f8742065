#include "kiln/graph/schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "kiln/base/error.h"
#include "kiln/graph/printer.h"

namespace kiln::graph {

int Schedule::max_width() const {
  size_t w = 0;
  for (const auto& l : levels) w = std::max(w, l.size());
  return static_cast<int>(w);
}

std::string Schedule::describe(const Graph& g) const {
  std::string out;
  for (size_t l = 0; l < levels.size(); ++l) {
    out += fmt::format("level {}:", l + 1);
    for (int i : levels[l]) out += fmt::format(" %{}={}", i, op_name(g.node(i).op));
    out += "\n";
  }
  out += fmt::format("{} ops in {} levels: {} barriers per step instead of {}\n", ops,
                     levels.size(), barriers_per_level(), barriers_per_op());
  return out;
}

Schedule schedule_levels(const Graph& g) {
  const int n = g.num_nodes();
  Schedule s;
  s.level_of.assign(n, 0);
  // Highest level among the readers of each value that is (or may become) consumed by a write.
  std::vector<std::vector<int>> reader_level(n);
  for (int i = 0; i < n; ++i) reader_level[i].assign(g.node(i).outputs.size(), 0);
  for (int i = 0; i < n; ++i) {
    const Node& node = g.node(i);
    if (node.is_source()) continue;
    int level = 0;
    for (const Value& in : node.inputs) {
      KILN_CHECK(in.node < i, "schedule: node {} reads node {}, which comes later", i, in.node);
      level = std::max(level, s.level_of[in.node]);
    }
    const int effect = effect_input(node.op);
    if (effect >= 0 && has_side_effect(node.op)) {
      const Value kv = node.inputs[effect];
      level =
          std::max(level, reader_level[kv.node][kv.index]);  // after every reader of the old state
    }
    s.level_of[i] = level + 1;
    if (effect >= 0 && !has_side_effect(node.op)) {
      int& r = reader_level[node.inputs[effect].node][node.inputs[effect].index];
      r = std::max(r, s.level_of[i]);
    }
    if (static_cast<int>(s.levels.size()) < s.level_of[i]) s.levels.resize(s.level_of[i]);
    s.levels[s.level_of[i] - 1].push_back(i);
    ++s.ops;
  }
  return s;
}

std::vector<WorkerGroup> split_workers(const std::vector<double>& costs, int threads) {
  KILN_CHECK(threads >= 1, "split_workers: {} threads", threads);
  const int n = static_cast<int>(costs.size());
  std::vector<WorkerGroup> groups(n);
  if (n == 0) return groups;
  if (n > threads) {
    // Longest cost first onto the least loaded thread.
    std::vector<int> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return costs[a] > costs[b]; });
    std::vector<double> load(threads, 0.0);
    for (int i : order) {
      const int t = static_cast<int>(std::min_element(load.begin(), load.end()) - load.begin());
      load[t] += std::max(costs[i], 0.0);
      groups[i] = WorkerGroup{t, 1};
    }
    return groups;
  }
  // One thread each, then the rest by largest remainder of the proportional share.
  double total = 0;
  for (double c : costs) total += std::max(c, 0.0);
  std::vector<int> count(n, 1);
  const int spare = threads - n;
  std::vector<double> remainder(n, 0.0);
  int given = 0;
  for (int i = 0; i < n; ++i) {
    const double share = total > 0 ? spare * std::max(costs[i], 0.0) / total : double(spare) / n;
    const int whole = static_cast<int>(share);
    count[i] += whole;
    given += whole;
    remainder[i] = share - whole;
  }
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return remainder[a] > remainder[b]; });
  for (int k = 0; given < spare; ++k, ++given) ++count[order[k % n]];
  int next = 0;
  for (int i = 0; i < n; ++i) {
    groups[i] = WorkerGroup{next, count[i]};
    next += count[i];
  }
  return groups;
}

}  // namespace kiln::graph
