#include "tp_group.h"

#include <cstdio>
#include <cstdlib>
#include <string>

#include "kiln/base/error.h"

#ifdef KILN_HAVE_MPI
#include "kiln/mpi/mpi_communicator.h"
#endif

namespace kiln::cli {
namespace {

// The world size mpirun (Open MPI, MPICH/Hydra) announces to the processes it starts; 1 when
// not started by mpirun.
int launcher_world_size() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    if (const char* v = std::getenv(var)) return std::atoi(v);
  }
  return 1;
}

}  // namespace

void add_tp_options(CLI::App* cmd, TpArgs& args) {
  cmd->add_option("--tp", args.tp,
                  "Tensor parallelism across N MPI ranks (run as: mpirun -np N kiln ... --tp N)")
      ->check(CLI::Range(1, 64));
  cmd->add_option("--tp-timeout", args.timeout_s,
                  "Seconds a collective may take before this rank gives up (a peer died)")
      ->check(CLI::Range(1.0, 86400.0));
}

std::unique_ptr<Communicator> open_tp_group(const TpArgs& args) {
  const int launched = launcher_world_size();
  if (args.tp == 1) {
    KILN_CHECK(launched <= 1,
               "started as one of {} MPI processes without --tp {}: each would run the whole "
               "model on its own",
               launched, launched);
    return nullptr;
  }
#ifdef KILN_HAVE_MPI
  KILN_CHECK(launched == args.tp,
             "--tp {} needs {} processes started by mpirun (mpirun -np {} kiln ... --tp {}); this "
             "one is one of {}",
             args.tp, args.tp, args.tp, args.tp, launched);
  std::unique_ptr<Communicator> group = make_mpi_communicator(nullptr, nullptr, args.timeout_s);
  KILN_CHECK(group->size() == args.tp, "--tp {} but the MPI world has {} ranks", args.tp,
             group->size());
  return group;
#else
  fail("--tp {}: this kiln was built without MPI (install libopenmpi-dev and rebuild)", args.tp);
#endif
}

void report_rank_error(Communicator& group, const std::exception& e) {
  std::fprintf(stderr, "kiln: error: rank %d of %d: %s\n", group.rank(), group.size(), e.what());
  std::fflush(stderr);
  group.abort(1);  // ends this rank and, with MPI, the others
}

}  // namespace kiln::cli
