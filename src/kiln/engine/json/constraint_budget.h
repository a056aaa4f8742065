// The work a schema's string constraints may take to compile. Patterns, formats and length
// limits are request input, and the automaton limits (state counts) bound memory, not time: a
// few states can still take ~10^9 steps to build. Every stage (regex parsing, NFA building with
// its {n,m} copies, determinization, intersection, length automata, trimming) charges the
// elementary steps it takes to one budget, shared by all the string constraints of one schema
// compile, so that many patterns cannot multiply the cost. Past the limit the compile stops
// with ConstraintBudgetExceeded; nothing is truncated.
#pragma once
#include <fmt/format.h>

#include <cstdint>
#include <stdexcept>

#include "kiln/base/input_limits.h"

namespace kiln::engine {

class ConstraintBudgetExceeded : public std::runtime_error {
 public:
  explicit ConstraintBudgetExceeded(uint64_t limit)
      : std::runtime_error(fmt::format("needs more than {} steps to compile", limit)) {}
};

class ConstraintBudget {
 public:
  explicit ConstraintBudget(uint64_t limit = kMaxConstraintCompileWork)
      : limit_(limit), left_(limit) {}

  // Counts `steps` more; throws once the total would pass the limit. Stages charge before (or
  // while) doing the work, so an input over budget stops within one charge of the limit.
  void charge(uint64_t steps) {
    if (steps > left_) {
      left_ = 0;
      throw ConstraintBudgetExceeded(limit_);
    }
    left_ -= steps;
  }
  uint64_t used() const { return limit_ - left_; }
  uint64_t limit() const { return limit_; }

 private:
  uint64_t limit_;
  uint64_t left_;
};

}  // namespace kiln::engine
