// The pass pipeline: one ordered list (pipeline.cc), run by `--graph-mode=optimize`, with
// per-pass statistics for `kiln graph` and the verifier after every pass in debug builds.
#pragma once
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "kiln/graph/passes/pass.h"

namespace kiln::graph {

struct PassStats {
  std::string name;
  bool changed = false;
  std::vector<std::pair<std::string, int64_t>> counters;
  double millis = 0;
  int nodes_after = 0;
};

struct PipelineOptions {
  PassOptions pass;
#ifdef NDEBUG
  bool verify_each = false;
#else
  bool verify_each = true;  // debug builds check the IR after every pass
#endif
  // Only annotate in-place aliases (for `--graph-mode=replay`: capture and replay the graph
  // as traced, no rewrites).
  bool rewrites = true;
  // Run the analyses (in-place aliasing). Off for a template that is rebatched first: aliasing
  // compares buffer sizes, so it runs on each rebatched graph instead.
  bool analyses = true;
  // Called after each pass (e.g. `kiln graph --print-after=<pass>`).
  std::function<void(std::string_view pass, const Graph&)> after_pass;
};

struct PassEntry {
  std::string_view name;
  PassFn run;
  bool rewrites;  // false: an analysis that only annotates (runs in every mode)
};

// The pipeline's passes in order.
const std::vector<PassEntry>& pipeline_passes();
// One pass by name, or nullptr.
const PassEntry* find_pass(std::string_view name);

// Runs the pipeline over `graph` and returns one entry per pass run. Throws Error (naming the
// pass) when verification after a pass fails.
std::vector<PassStats> run_pipeline(Graph& graph, const PipelineOptions& options = {});

// Statistics as an aligned text table (name, changed, time, nodes, counters).
std::string format_pass_stats(const std::vector<PassStats>& stats);

}  // namespace kiln::graph
