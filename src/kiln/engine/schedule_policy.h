// Which waiting request the scheduler admits next, and which running request it gives up first
// when the KV pool runs out. The scheduler (scheduler.h) owns the queues, the pages and the
// steps; this unit only decides orders, from each request's ScheduleTicket.
//
// Admission order, most urgent first:
//   1. requests that later arrivals have overtaken ScheduleConfig::max_times_overtaken times,
//      oldest first: however low its priority or short its cached prefix, a request waits for
//      at most that many admissions of newer requests;
//   2. higher `priority` first (SGLang's convention: a larger value is more urgent);
//   3. lpm only: more prompt tokens already in the prefix cache first (longest prefix match);
//   4. earlier arrival first (a preempted request keeps its arrival, so it goes back ahead of
//      newer ones).
// With fcfs and equal priorities this is arrival order, the scheduler's order before policies
// existed: nobody is ever overtaken, so step 1 never applies.
//
// Preemption: the victim is the least protected running request, protection being higher
// priority, then earlier arrival (with equal priorities: the youngest, as before).
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

namespace kiln::engine {

enum class SchedulePolicy {
  kFcfs,  // first come, first served
  kLpm,   // longest prefix match first: requests whose prompt is cached run while it is
};

// "fcfs" or "lpm"; throws kiln::Error naming the accepted values for anything else.
SchedulePolicy parse_schedule_policy(std::string_view name);
const char* schedule_policy_name(SchedulePolicy policy);

struct ScheduleConfig {
  // lpm: on a shared-prefix load whose prefixes do not all fit in the KV pool it keeps the
  // cached ones in use (docs/http-server.md has the figures); with nothing to share it is
  // fcfs plus a bounded number of prefix matches per step.
  SchedulePolicy policy = SchedulePolicy::kLpm;
  // Bounded wait: a waiting request that this many newer requests were admitted ahead of (for
  // their priority or their cached prefix) goes to the front of the queue.
  int64_t max_times_overtaken = 64;
  // lpm matches at most this many waiting requests against the prefix cache per step (those
  // nearest the front by priority and arrival; the rest keep their order behind them), so a
  // long queue does not cost a prefix match of every prompt on every step. SGLang falls back
  // to fcfs past 128 waiting requests for the same reason.
  int64_t max_lpm_candidates = 128;
};

// A request's scheduling state, kept by the scheduler with the request.
struct ScheduleTicket {
  uint64_t arrival = 0;  // submission order
  int32_t priority = 0;  // larger: more urgent
  // Newer requests admitted while this one waited (ScheduleConfig::max_times_overtaken).
  int64_t times_overtaken = 0;
};

// Throws kiln::Error for a configuration the functions below cannot work with.
void validate(const ScheduleConfig& config);

// The order in which to try to admit `waiting` (indices into it). `cached_tokens(i)`: the
// prompt tokens of waiting[i] found in the prefix cache now; called by lpm only, for at most
// config.max_lpm_candidates requests.
std::vector<size_t> admission_order(const ScheduleConfig& config,
                                    std::span<const ScheduleTicket> waiting,
                                    const std::function<int64_t(size_t)>& cached_tokens);

// Bookkeeping once `admitted` has left the queue, for each request still waiting: one that
// arrived before it has been overtaken once more.
void count_overtaken(const ScheduleTicket& admitted, ScheduleTicket& still_waiting);

// True when `a` keeps running longer than `b` under memory pressure (higher priority, then
// earlier arrival): the scheduler preempts the request that sorts last.
bool protected_before(const ScheduleTicket& a, const ScheduleTicket& b);

}  // namespace kiln::engine
