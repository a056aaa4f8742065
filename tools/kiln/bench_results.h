// What `kiln bench` measures, and its three renderings: a text table (stdout), JSON (--json)
// and an SVG bar chart (--plot). The measuring is in bench_command.cc.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace kiln::cli {

// One execution mode (eager or graph) at one batch size.
struct ModeFigures {
  bool ran = false;
  double decode_seconds = 0;      // the timed decode loop: output_len steps
  double decode_tok_s = 0;        // bs * output_len / decode_seconds
  double decode_cpu_seconds = 0;  // process CPU time (all threads) of the timed loop
  // The probe: the same mid-sequence decode step repeated; the smallest time.
  double step_ms = 0;
  bool kernels_profiled = false;  // kernel_ms, overhead_ms and kernels measured (not under --tp)
  double kernel_ms = 0;           // kernel time of that step (kernel_profile.h)
  double overhead_ms = 0;         // step_ms - kernel_ms
  int kernels = 0;                // kernel launches per step
  int barriers = 0;               // barriers (eager: one dispatch + barrier per op) per step
  int barriers_unfused = 0;       // graph: one per step of the plan (what per-op sync would cost)
  // graph: host overhead timed directly, the mean of host_only_replays replays with every
  // kernel skipped (GraphRunner::run_host_only: input staging, update hooks, level barriers,
  // output copies)
  double host_only_us = 0;
  int64_t host_only_replays = 0;
  std::vector<std::vector<int32_t>> tokens;  // per sequence, for the graph == eager check
};

struct BatchFigures {
  int bs = 0;
  double prefill_seconds = 0;  // every prompt of the batch, eager, in --prefill-chunk steps
  double prefill_tok_s = 0;
  int prefill_chunks = 0;
  ModeFigures eager;
  ModeFigures graph;
  std::optional<bool> tokens_match;  // both modes ran: identical greedy tokens
};

// One configuration of the --breakdown ladder.
struct BreakdownRow {
  std::string name;
  std::string description;
  double step_ms = 0;
  bool kernels_profiled = false;
  double kernel_ms = 0;
  double overhead_ms = 0;
  int kernels = 0;
  int barriers = 0;
};

struct CaptureFigures {
  bool ran = false;
  int plans = 0;
  double cold_seconds = 0;
  double warm_seconds = 0;
  bool warm_cache_hit = false;
  size_t arena_bytes = 0;
  size_t sum_plan_bytes = 0;
  size_t max_plan_bytes = 0;
  // Resident memory the cold capture added (plans, their static buffers, merged weights packed
  // on first use): what a server pays for graph mode on top of eager.
  int64_t rss_growth_bytes = 0;
};

struct BenchFigures {
  std::string model_name, model_path, architecture, isa;
  int64_t n_params = 0;
  size_t weight_bytes = 0;  // under --tp: rank 0's shard
  int tp = 1;               // ranks (--tp); every figure below is rank 0's
  std::string tp_summary;   // under --tp: rank 0's steps and the collectives inside them
  int threads = 0, input_len = 0, output_len = 0, max_graph_bs = 0, repeats = 0, prefill_chunk = 0;
  std::vector<std::string> modes;
  std::vector<double> load_start, load_end;  // /proc/loadavg 1, 5, 15 min
  CaptureFigures capture;
  double bandwidth_gbs = 0;
  std::string bandwidth_source;  // "measured (1 GiB read)" or "--bandwidth-gbs"
  std::vector<BatchFigures> batches;
  int breakdown_bs = 0;
  std::vector<BreakdownRow> breakdown;
};

// Achieved weight-read bandwidth of a decode step time, and its fraction of the measured one.
double weight_gbs(const BenchFigures& f, double step_ms);

std::string format_table(const BenchFigures& f);
nlohmann::json to_json(const BenchFigures& f);
std::string to_svg(const BenchFigures& f);

}  // namespace kiln::cli
