// Lowering of the tensor-parallel collectives (op_table.h). A collective step runs on thread
// 0 of its group only: the other threads have nothing to do, and MPI is entered from one
// thread at a time (the schedule never puts two collectives in one level). The step's state
// is the Communicator; its scratch holds the gathered partials.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kiln/base/error.h"
#include "kiln/base/thread_pool.h"
#include "kiln/graph/lowering_internal.h"

namespace kiln::graph::lowering {
namespace {

Communicator& comm_of(const Step& s) { return *static_cast<Communicator*>(s.state); }

void run_all_reduce(const Step& s, const AllReduceArgs& a, const kernels::ExecContext& c) {
  if (c.tid != 0) return;
  comm_of(s).allreduce_sum(static_cast<const float*>(s.in[0]), static_cast<float*>(s.out[0]),
                           static_cast<size_t>(a.count), static_cast<float*>(s.scratch));
}

// Every rank sends its slice padded to the widest one (MPI's allgather wants equal counts);
// scratch holds the padded send block, then every rank's block.
void run_all_gather_vocab(const Step& s, const VocabShardArgs& a, const kernels::ExecContext& c) {
  if (c.tid != 0) return;
  Communicator& comm = comm_of(s);
  const int64_t rows = a.rows, cols = a.cols, vocab = a.vocab, wide = a.widest_slice;
  auto* send = static_cast<float*>(s.scratch);
  float* recv = send + rows * wide;
  const auto* in = static_cast<const float*>(s.in[0]);
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(send + r * wide, in + r * cols, static_cast<size_t>(cols) * sizeof(float));
    std::fill(send + r * wide + cols, send + (r + 1) * wide, 0.0f);
  }
  comm.allgather(send, static_cast<size_t>(rows * wide) * sizeof(float), recv);
  auto* out = static_cast<float*>(s.out[0]);
  for (int k = 0; k < comm.size(); ++k) {
    const Range slice = split_range(vocab, k, comm.size());
    const float* block = recv + static_cast<int64_t>(k) * rows * wide;
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(out + r * vocab + slice.begin, block + r * wide,
                  static_cast<size_t>(slice.end - slice.begin) * sizeof(float));
    }
  }
}

struct Candidate {
  float value;
  int32_t id;  // global token id; -1: the slice had no non-NaN entry
};

// Each rank's first maximum, then the first rank holding the overall maximum: the lowest id
// among ties, as argmax_rows gives.
void run_all_argmax(const Step& s, const VocabShardArgs& a, const kernels::ExecContext& c) {
  if (c.tid != 0) return;
  Communicator& comm = comm_of(s);
  const int64_t rows = a.rows, cols = a.cols, vocab = a.vocab;
  const Range mine = split_range(vocab, comm.rank(), comm.size());
  auto* send = static_cast<Candidate*>(s.scratch);
  Candidate* recv = send + rows;
  const auto* in = static_cast<const float*>(s.in[0]);
  for (int64_t r = 0; r < rows; ++r) {
    Candidate best{0.0f, -1};
    const float* row = in + r * cols;
    for (int64_t j = 0; j < cols; ++j) {
      if (!std::isnan(row[j]) && (best.id < 0 || row[j] > best.value))
        best = {row[j], static_cast<int32_t>(mine.begin + j)};
    }
    send[r] = best;
  }
  comm.allgather(send, static_cast<size_t>(rows) * sizeof(Candidate), recv);
  auto* out = static_cast<int32_t*>(s.out[0]);
  for (int64_t r = 0; r < rows; ++r) {
    Candidate best{0.0f, -1};
    for (int k = 0; k < comm.size(); ++k) {
      const Candidate& cand = recv[k * rows + r];
      if (cand.id >= 0 && (best.id < 0 || cand.value > best.value)) best = cand;
    }
    out[r] = best.id < 0 ? 0 : best.id;  // all NaN: 0, like argmax_rows
  }
}

// The group the weights' shard belongs to: a collective without one cannot run.
Communicator& group_of(const LowerContext& ctx, const Node& node) {
  Communicator* comm = ctx.weights->communicator();
  if (comm != nullptr) return *comm;
  fail("graph has a {} node but its weights belong to no tensor-parallel group (--tp)",
       op_name(node.op));
}

}  // namespace

bool lower_collective(const LowerContext& ctx, const Node& node, Lowered& l) {
  if (!is_collective(node.op)) return false;
  Communicator* comm = &group_of(ctx, node);
  Step& s = l.step;
  s.state = comm;
  const ValueType& in0 = ctx.graph->type(node.inputs[0]);
  const auto ranks = static_cast<int64_t>(comm->size());
  switch (node.op) {
    case Op::AllReduce: {
      const int64_t count = in0.shape.numel();
      set_kernel<run_all_reduce>(s, {.count = count});
      l.scratch_bytes = static_cast<size_t>(ranks * count) * sizeof(float);
      return true;
    }
    case Op::AllGatherVocab:
    case Op::AllArgmax: {
      const int64_t vocab = node.attrs.get_int("vocab");
      const Range mine = split_range(vocab, comm->rank(), comm->size());
      KILN_CHECK(in0.shape.cols() == mine.end - mine.begin,
                 "{}: rank {} of {} holds {} vocabulary columns, its slice of {} is {}",
                 op_name(node.op), comm->rank(), ranks, in0.shape.cols(), vocab,
                 mine.end - mine.begin);
      const int64_t rows = in0.shape.rows();
      const int64_t wide = split_range(vocab, 0, comm->size()).end;  // rank 0's is the widest
      const VocabShardArgs args{
          .rows = rows, .cols = in0.shape.cols(), .vocab = vocab, .widest_slice = wide};
      if (node.op == Op::AllArgmax) {
        set_kernel<run_all_argmax>(s, args);
        l.scratch_bytes = static_cast<size_t>((1 + ranks) * rows) * sizeof(Candidate);
        return true;
      }
      set_kernel<run_all_gather_vocab>(s, args);
      l.scratch_bytes = static_cast<size_t>((1 + ranks) * rows * wide) * sizeof(float);
      return true;
    }
    default:
      return false;
  }
}

}  // namespace kiln::graph::lowering
