#include "kiln/engine/speculation_policy.h"

#include <algorithm>
#include <cmath>
#include <iterator>

namespace kiln::engine {

double StepCostModel::Recent::fastest() const {
  const size_t n = std::min(count, kWindow);
  return *std::min_element(seconds, seconds + n);
}

void StepCostModel::record(int64_t rows, double seconds) {
  Recent& r = recent_[rows];
  r.seconds[r.count % kWindow] = seconds;
  ++r.count;
}

std::optional<double> StepCostModel::estimate(int64_t rows) const {
  if (recent_.empty()) return std::nullopt;
  auto hi = recent_.lower_bound(rows);
  if (hi == recent_.end()) return std::prev(hi)->second.fastest();
  if (hi->first == rows || hi == recent_.begin()) return hi->second.fastest();
  auto lo = std::prev(hi);
  const double t =
      static_cast<double>(rows - lo->first) / static_cast<double>(hi->first - lo->first);
  const double a = lo->second.fastest(), b = hi->second.fastest();
  return a + t * (b - a);
}

int64_t proposal_budget(RequestSpeculation& spec, int64_t num_draft_tokens, int64_t tokens_left) {
  if (spec.skip > 0) {
    --spec.skip;
    return 0;
  }
  return std::min<int64_t>({num_draft_tokens, spec.limit, tokens_left - 1});
}

void back_off(RequestSpeculation& spec, int64_t proposed, int64_t accepted) {
  if (accepted == 0) {
    spec.misses = std::min(spec.misses + 1, 3);
    spec.skip = (1 << spec.misses) - 1;
    spec.limit = std::max(1, spec.limit / 2);
  } else {
    spec.misses = 0;
    spec.limit = accepted == proposed
                     ? std::min(RequestSpeculation::kMaxDraftTokens, spec.limit * 2)
                     : std::max(1, static_cast<int>(accepted) + 1);
  }
}

double expected_tokens(double first, double next, int64_t k) {
  if (k <= 0) return 1.0;
  const double f = std::clamp(first, 0.0, 1.0), n = std::clamp(next, 0.0, 1.0);
  const double run =
      n >= 1.0 ? static_cast<double>(k) : (1.0 - std::pow(n, static_cast<double>(k))) / (1.0 - n);
  return 1.0 + f * run;
}

int64_t choose_proposal_cap(std::span<const SpeculationCandidate> candidates, int64_t plain_rows,
                            const std::function<double(int64_t rows)>& step_seconds,
                            double draft_seconds_per_token) {
  int64_t largest = 0;
  for (const auto& c : candidates) largest = std::max(largest, c.budget);
  const auto n = static_cast<int64_t>(candidates.size());
  int64_t best_cap = 0;
  double best_rate = -1.0;
  for (int64_t cap = 0;; cap = cap == 0 ? 1 : cap * 2) {
    cap = std::min(cap, largest);
    double tokens = static_cast<double>(plain_rows);
    int64_t rows = plain_rows + n;
    int64_t longest = 0;
    for (const auto& c : candidates) {
      const int64_t k = std::min(cap, c.budget);
      tokens += expected_tokens(c.first, c.next, k);
      rows += k;
      longest = std::max(longest, k);
    }
    // A draft model proposes its tokens one step per position, every candidate at once.
    const double seconds =
        step_seconds(rows) + draft_seconds_per_token * static_cast<double>(longest);
    const double rate = seconds > 0 ? tokens / seconds : tokens;
    if (rate > best_rate * (1.0 + 1e-9)) {
      best_rate = rate;
      best_cap = cap;
    }
    if (cap >= largest) break;
  }
  return best_cap;
}

}  // namespace kiln::engine
