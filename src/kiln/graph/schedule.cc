#include "kiln/graph/schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "kiln/base/error.h"

namespace kiln::graph {

std::vector<int> node_levels(const Graph& g) {
  const int n = g.num_nodes();
  std::vector<int> level(n, -1);
  // Highest level among the readers of each value that a write may consume (a state token):
  // the write must come after every read of the state it replaces.
  std::vector<std::vector<int>> reader_level(n);
  for (int i = 0; i < n; ++i) reader_level[i].assign(g.node(i).outputs.size(), -1);
  // Collectives form a chain in node order: each in a later level than the one before, so
  // two are never in flight at once and every rank meets them in the same order.
  int last_collective = -1;
  for (int i = 0; i < n; ++i) {
    const Node& node = g.node(i);
    if (node.is_source()) continue;
    int lv = is_collective(node.op) ? last_collective + 1 : 0;
    for (const Value& in : node.inputs) {
      KILN_CHECK(in.node < i, "schedule: node {} reads node {}, which comes later", i, in.node);
      lv = std::max(lv, level[in.node] + 1);
    }
    const int effect = effect_input(node.op);
    if (effect >= 0) {
      const Value kv = node.inputs[effect];
      int& readers = reader_level[kv.node][kv.index];
      if (has_side_effect(node.op)) {
        lv = std::max(lv, readers + 1);  // after every reader of the old state
      } else {
        readers = std::max(readers, lv);
      }
    }
    level[i] = lv;
    if (is_collective(node.op)) last_collective = lv;
  }
  return level;
}

std::vector<std::vector<int>> schedule_levels(const Graph& g) {
  const std::vector<int> level = node_levels(g);
  std::vector<std::vector<int>> levels;
  for (int i = 0; i < g.num_nodes(); ++i) {
    if (level[i] < 0) continue;
    if (static_cast<int>(levels.size()) <= level[i]) levels.resize(level[i] + 1);
    levels[level[i]].push_back(i);
  }
  return levels;
}

ScheduleStats schedule_stats(const std::vector<std::vector<int>>& levels) {
  ScheduleStats s;
  s.levels = static_cast<int>(levels.size());
  for (const auto& l : levels) {
    s.ops += static_cast<int>(l.size());
    s.max_width = std::max(s.max_width, static_cast<int>(l.size()));
  }
  return s;
}

std::string describe_schedule(const Graph& g, const std::vector<std::vector<int>>& levels) {
  std::string out;
  for (size_t l = 0; l < levels.size(); ++l) {
    out += fmt::format("level {}:", l);
    for (int i : levels[l]) out += fmt::format(" %{}={}", i, op_name(g.node(i).op));
    out += "\n";
  }
  const ScheduleStats s = schedule_stats(levels);
  out += fmt::format("{} ops in {} levels: {} barriers per step instead of {}\n", s.ops, s.levels,
                     s.levels, s.ops);
  return out;
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
