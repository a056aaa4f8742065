// `kiln bench --rounds N`: the eager/graph decode comparison repeated N times in one process,
// the two modes alternating which goes first, so that a host whose speed drifts within minutes
// shows up as spread instead of as a verdict. Each sample carries the process CPU time of its
// timed loop beside the wall time: a round slowed by a stolen core shows CPU per step unchanged
// and wall time up (low CPU utilisation), a round where the engine itself did more work shows
// both up.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kiln::cli {

struct DecodeSample {
  double tok_s = 0;
  double wall_step_ms = 0;  // mean over the timed loop
  double cpu_step_ms = 0;   // process CPU time per step (all threads)
  double utilisation = 0;   // cpu / (wall * threads): 1.0 = every thread busy all the time
};

struct RoundFigures {
  int round = 0;
  int bs = 0;
  bool graph_first = false;
  DecodeSample eager, graph;
  bool tokens_match = true;
};

// Per round and batch size, then per batch size: median eager and graph tok/s, the median
// graph/eager ratio with its min-max spread, and median CPU per step in each mode.
std::string format_rounds(const std::vector<RoundFigures>& rounds);
nlohmann::json rounds_json(const std::vector<RoundFigures>& rounds);

// Process CPU time (all threads) in seconds.
double process_cpu_seconds();

}  // namespace kiln::cli
