// `kiln bench --paired-steps`: one decode loop in which every step runs twice, once in each
// mode, back to back on the same inputs (the second run rewrites the same KV slot with the same
// values), the order alternating from step to step. The two runs of a pair are milliseconds
// apart, so a host whose speed drifts over seconds or minutes slows both alike: the per-pair
// ratio measures the modes against each other, where whole loops run minutes apart (--rounds)
// measure the host's drift as much as the modes.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kiln::cli {

struct PairedFigures {
  int bs = 0;
  std::vector<double> eager_ms, graph_ms;    // per step, wall time of each mode's run
  bool tokens_match = true;                  // every pair gave the same tokens
  std::vector<std::vector<int32_t>> tokens;  // the greedy tokens, per sequence
};

// Per batch size: pairs, median step time per mode, the ratio of the summed times, and the
// median per-pair eager/graph ratio with its 10th-90th percentile spread and the share of
// pairs graph mode won.
std::string format_paired(const std::vector<PairedFigures>& paired);
nlohmann::json paired_json(const std::vector<PairedFigures>& paired);

}  // namespace kiln::cli
