#include "bench_paired.h"

#include <fmt/format.h>

#include <numeric>

#include "order_stats.h"

namespace kiln::cli {
namespace {

struct PairedSummary {
  double eager_ms = 0, graph_ms = 0;   // medians
  double sum_ratio = 0;                // summed eager time / summed graph time
  double ratio = 0, p10 = 0, p90 = 0;  // per-pair eager/graph
  double graph_won = 0;                // share of pairs where graph mode was faster
};

PairedSummary summarize(const PairedFigures& p) {
  PairedSummary s;
  std::vector<double> ratios;
  int won = 0;
  for (size_t i = 0; i < p.eager_ms.size(); ++i) {
    ratios.push_back(p.eager_ms[i] / p.graph_ms[i]);
    won += p.graph_ms[i] < p.eager_ms[i];
  }
  s.eager_ms = median(p.eager_ms);
  s.graph_ms = median(p.graph_ms);
  const double se = std::accumulate(p.eager_ms.begin(), p.eager_ms.end(), 0.0);
  const double sg = std::accumulate(p.graph_ms.begin(), p.graph_ms.end(), 0.0);
  s.sum_ratio = sg > 0 ? se / sg : 0;
  s.ratio = median(ratios);
  s.p10 = quantile(ratios, 0.1);
  s.p90 = quantile(ratios, 0.9);
  s.graph_won = ratios.empty() ? 0 : static_cast<double>(won) / static_cast<double>(ratios.size());
  return s;
}

}  // namespace

std::string format_paired(const std::vector<PairedFigures>& paired) {
  std::string s =
      "\npaired steps (every decode step run in both modes back to back, order alternating; "
      "ratio = eager ms / graph ms):\n";
  s += fmt::format("{:>4} | {:>5} | {:>8} {:>8} | {:>9} | {:>22} | {:>9} | {}\n", "bs", "pairs",
                   "eager ms", "graph ms", "sum ratio", "pair ratio [p10, p90]", "graph won",
                   "same");
  for (const auto& p : paired) {
    const PairedSummary m = summarize(p);
    s += fmt::format(
        "{:>4} | {:>5} | {:>8.3f} {:>8.3f} | {:>8.3f}x | {:>6.3f}x [{:.3f}, {:.3f}] | {:>8.0f}% "
        "| {}\n",
        p.bs, p.eager_ms.size(), m.eager_ms, m.graph_ms, m.sum_ratio, m.ratio, m.p10, m.p90,
        100 * m.graph_won, p.tokens_match ? "yes" : "NO");
  }
  return s;
}

nlohmann::json paired_json(const std::vector<PairedFigures>& paired) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& p : paired) {
    const PairedSummary m = summarize(p);
    out.push_back({{"bs", p.bs},
                   {"eager_ms", p.eager_ms},
                   {"graph_ms", p.graph_ms},
                   {"median_eager_ms", m.eager_ms},
                   {"median_graph_ms", m.graph_ms},
                   {"sum_ratio", m.sum_ratio},
                   {"pair_ratio_median", m.ratio},
                   {"pair_ratio_p10", m.p10},
                   {"pair_ratio_p90", m.p90},
                   {"graph_won", m.graph_won},
                   {"tokens_match", p.tokens_match},
                   {"tokens", p.tokens}});
  }
  return out;
}

}  // namespace kiln::cli
