// `--tp N` on the command line: opens the tensor-parallel process group this process is one
// rank of (docs/tensor-parallel.md).
// `mpirun -np N kiln run|serve|bench|logits|perplexity ... --tp N`.
#pragma once
#include <CLI/CLI.hpp>
#include <exception>
#include <memory>

#include "kiln/base/communicator.h"

namespace kiln::cli {

struct TpArgs {
  int tp = 1;
  double timeout_s = 120;  // --tp-timeout: how long one collective may take
};

// --tp and --tp-timeout.
void add_tp_options(CLI::App* cmd, TpArgs& args);

// The group for --tp N: null for N = 1 (after checking this process was not started as one
// of several MPI ranks, which would silently run N whole models); for N > 1 the MPI world,
// which must have exactly N ranks. Throws kiln::Error when kiln was built without MPI.
std::unique_ptr<Communicator> open_tp_group(const TpArgs& args);

// Prints the error with the rank, then ends every rank of the group (Communicator::abort).
void report_rank_error(Communicator& group, const std::exception& e);

// Runs `body`; under --tp an error on one rank ends every rank (the others would otherwise
// wait in their next collective until the timeout) after printing it with the rank.
template <typename F>
int run_tp_guarded(Communicator* group, F&& body) {
  if (group == nullptr || group->size() == 1) return body();
  try {
    return body();
  } catch (const std::exception& e) {
    report_rank_error(*group, e);
    return 1;  // not reached: abort ends the process
  }
}

}  // namespace kiln::cli
