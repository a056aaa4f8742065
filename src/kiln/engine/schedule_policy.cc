#include "kiln/engine/schedule_policy.h"

#include <algorithm>
#include <numeric>

#include "kiln/base/error.h"

namespace kiln::engine {

SchedulePolicy parse_schedule_policy(std::string_view name) {
  if (name == "fcfs") return SchedulePolicy::kFcfs;
  if (name == "lpm") return SchedulePolicy::kLpm;
  fail("unknown schedule policy '{}' (expected lpm or fcfs)", name);
}

const char* schedule_policy_name(SchedulePolicy policy) {
  return policy == SchedulePolicy::kLpm ? "lpm" : "fcfs";
}

void validate(const ScheduleConfig& config) {
  KILN_CHECK(config.max_times_overtaken >= 1, "max_times_overtaken must be positive, got {}",
             config.max_times_overtaken);
  KILN_CHECK(config.max_lpm_candidates >= 0, "max_lpm_candidates must be >= 0, got {}",
             config.max_lpm_candidates);
}

std::vector<size_t> admission_order(const ScheduleConfig& config,
                                    std::span<const ScheduleTicket> waiting,
                                    const std::function<int64_t(size_t)>& cached_tokens) {
  const auto waited_too_long = [&](const ScheduleTicket& t) {
    return t.times_overtaken >= config.max_times_overtaken;
  };
  // Tiers 1, 2 and 4 of the header's order; lpm then reorders within a priority.
  const auto before = [&](size_t a, size_t b) {
    const ScheduleTicket& x = waiting[a];
    const ScheduleTicket& y = waiting[b];
    const bool x_due = waited_too_long(x), y_due = waited_too_long(y);
    if (x_due != y_due) return x_due;
    if (!x_due && x.priority != y.priority) return x.priority > y.priority;
    return x.arrival < y.arrival;
  };
  std::vector<size_t> order(waiting.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), before);
  if (config.policy != SchedulePolicy::kLpm) return order;

  // Only the candidates nearest the front are matched; the others count as matching nothing,
  // which keeps them behind every matched one of their priority (they arrived later).
  std::vector<int64_t> cached(waiting.size(), 0);
  const auto n_matched = std::min<size_t>(order.size(), config.max_lpm_candidates);
  for (size_t k = 0; k < n_matched; ++k) cached[order[k]] = cached_tokens(order[k]);
  // Stable: equal matches keep the order above (arrival within a priority).
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const ScheduleTicket& x = waiting[a];
    const ScheduleTicket& y = waiting[b];
    const bool x_due = waited_too_long(x), y_due = waited_too_long(y);
    if (x_due != y_due) return x_due;
    if (x_due) return false;  // already by arrival
    if (x.priority != y.priority) return x.priority > y.priority;
    return cached[a] > cached[b];
  });
  return order;
}

void count_overtaken(const ScheduleTicket& admitted, ScheduleTicket& still_waiting) {
  if (still_waiting.arrival < admitted.arrival) ++still_waiting.times_overtaken;
}

bool protected_before(const ScheduleTicket& a, const ScheduleTicket& b) {
  if (a.priority != b.priority) return a.priority > b.priority;
  return a.arrival < b.arrival;
}

}  // namespace kiln::engine
