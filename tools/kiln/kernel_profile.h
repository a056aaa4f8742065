// Time spent inside kernels during one execution of a graph, for splitting a measured step
// time into kernel time and host overhead (`kiln bench`).
//
// Method: every node is lowered once up front (untimed) with a fresh buffer per value, like
// the eager interpreter. Then each step runs on the whole pool as its own dispatch: the
// threads first meet at a barrier, thread 0 reads the clock, the kernel runs, the threads meet
// at a second barrier (the kernel is done only when its slowest thread is), and thread 0 reads
// the clock again. Each kernel's best interval over the repeats, summed, is the kernel time;
// update hooks, dispatch and wake-ups fall outside it. Overhead of a mode = its measured step time
// minus the kernel time of the graph it runs (the optimized plan's graph for graph mode, the traced
// graph for eager mode), so both modes are charged by the same rule. Caveats: fresh buffers instead
// of the plan's arena (cache locality may differ slightly) and one barrier per kernel counted as
// kernel time (~1 us at most on this machine).
#pragma once
#include <string>
#include <vector>

#include "kiln/base/thread_pool.h"
#include "kiln/graph/interpreter.h"
#include "kiln/graph/lowering.h"

namespace kiln::cli {

// Kernel time of one op kind (every node of that op summed), for `kiln bench --op-profile`.
struct OpKernelTime {
  std::string op;
  int count = 0;
  double seconds = 0;
  double weight_bytes = 0;  // packed matmul weights the op's nodes stream (0 for other ops)
};

struct KernelProfile {
  double kernel_seconds = 0;        // sum over kernels of each kernel's best time over the repeats
  int kernels = 0;                  // steps that run a kernel (views and sources excluded)
  std::vector<OpKernelTime> by_op;  // slowest op kind first
};

// The by_op table as text: op, nodes, ms, share of the kernel time, and for ops that stream
// matmul weights the bytes and GB/s (compare with the machine's read bandwidth).
std::string format_op_profile(const KernelProfile& p);

// Runs `graph` `repeats` times with these bindings (inputs and the KV state, as for the
// interpreter). It writes the KV slots the bindings name, as a real step would.
KernelProfile profile_kernels(const graph::Graph& graph,
                              const std::vector<graph::Binding>& bindings, ThreadPool& pool,
                              graph::WeightProvider& weights, const graph::KvGeometry& kv,
                              int repeats);

}  // namespace kiln::cli
