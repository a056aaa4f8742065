#include "bench_rounds.h"

#include <fmt/format.h>

#include <algorithm>
#include <ctime>
#include <map>

#include "order_stats.h"

namespace kiln::cli {
namespace {

nlohmann::json sample_json(const DecodeSample& s) {
  return {{"tok_s", s.tok_s},
          {"wall_step_ms", s.wall_step_ms},
          {"cpu_step_ms", s.cpu_step_ms},
          {"utilisation", s.utilisation}};
}

}  // namespace

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

std::string format_rounds(const std::vector<RoundFigures>& rounds) {
  std::string s =
      "\ninterleaved rounds (decode loop; cpu = process CPU ms per step, util = cpu / "
      "(wall x threads)):\n";
  s += fmt::format("{:>5} {:>4} {:>6} | {:>11} {:>8} {:>5} | {:>11} {:>8} {:>5} | {:>6} | {}\n",
                   "round", "bs", "first", "eager tok/s", "cpu ms", "util", "graph tok/s", "cpu ms",
                   "util", "ratio", "same");
  std::map<int, std::vector<const RoundFigures*>> by_bs;
  for (const auto& r : rounds) {
    by_bs[r.bs].push_back(&r);
    s += fmt::format(
        "{:>5} {:>4} {:>6} | {:>11.1f} {:>8.2f} {:>5.2f} | {:>11.1f} {:>8.2f} {:>5.2f} | {:>5.2f}x "
        "| {}\n",
        r.round, r.bs, r.graph_first ? "graph" : "eager", r.eager.tok_s, r.eager.cpu_step_ms,
        r.eager.utilisation, r.graph.tok_s, r.graph.cpu_step_ms, r.graph.utilisation,
        r.graph.tok_s / r.eager.tok_s, r.tokens_match ? "yes" : "NO");
  }
  s += "\nmedians over rounds (ratio: median [min, max] of the per-round graph/eager ratios):\n";
  s += fmt::format("{:>4} | {:>11} {:>11} | {:>22} | {:>17} | {:>8}\n", "bs", "eager tok/s",
                   "graph tok/s", "graph/eager", "cpu ms eager/graph", "rounds");
  for (const auto& [bs, rs] : by_bs) {
    std::vector<double> e, g, ratio, ce, cg;
    for (const auto* r : rs) {
      e.push_back(r->eager.tok_s);
      g.push_back(r->graph.tok_s);
      ratio.push_back(r->graph.tok_s / r->eager.tok_s);
      ce.push_back(r->eager.cpu_step_ms);
      cg.push_back(r->graph.cpu_step_ms);
    }
    s += fmt::format(
        "{:>4} | {:>11.1f} {:>11.1f} | {:>6.2f}x [{:.2f}, {:.2f}] | {:>8.2f} {:>8.2f} "
        "| {:>8}\n",
        bs, median(e), median(g), median(ratio), *std::min_element(ratio.begin(), ratio.end()),
        *std::max_element(ratio.begin(), ratio.end()), median(ce), median(cg), rs.size());
  }
  return s;
}

nlohmann::json rounds_json(const std::vector<RoundFigures>& rounds) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& r : rounds) {
    out.push_back({{"round", r.round},
                   {"bs", r.bs},
                   {"graph_first", r.graph_first},
                   {"eager", sample_json(r.eager)},
                   {"graph", sample_json(r.graph)},
                   {"tokens_match", r.tokens_match}});
  }
  return out;
}

}  // namespace kiln::cli
