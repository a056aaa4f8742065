// Communicator over MPI (one process per rank, `mpirun -np N kiln ... --tp N`). Built only
// when CMake finds MPI; the CLI reaches it through make_mpi_communicator().
//
// Failure handling (docs/tensor-parallel.md, "When a rank dies"): MPI errors return instead
// of aborting silently and are thrown as kiln::Error naming the rank and the operation; every
// collective runs under a watchdog that ends the process with a clear message when it has not
// completed within the timeout (a peer that died or hangs would otherwise block it forever),
// and mpirun then stops the remaining ranks.
#pragma once
#include <memory>

#include "kiln/base/communicator.h"

namespace kiln {

class MpiCommunicator;

// Initializes MPI (MPI_THREAD_SERIALIZED: collectives come from one thread at a time, not
// always the same one) and returns the world communicator; finalizes MPI when destroyed.
// `timeout_s`: how long one collective may take before the process gives up.
std::unique_ptr<Communicator> make_mpi_communicator(int* argc, char*** argv, double timeout_s);

}  // namespace kiln
