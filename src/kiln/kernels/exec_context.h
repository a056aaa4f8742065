// How a kernel learns its share of the work. A kernel is called on every thread of a worker
// group at once, each with its own tid in [0, nth); `sync()` waits for the whole group (for
// kernels with phases, e.g. quantize the activations, then multiply). The eager interpreter
// passes the whole thread pool as one group; a graph plan may run independent kernels on
// disjoint groups at the same time.
#pragma once
#include "kiln/base/thread_pool.h"

namespace kiln::kernels {

struct ExecContext {
  int tid = 0;
  int nth = 1;
  SpinBarrier* barrier = nullptr;  // null when nth == 1
  void sync() const {
    if (barrier != nullptr) barrier->arrive_and_wait();
  }
};

}  // namespace kiln::kernels
