// The process group of tensor parallelism (docs/tensor-parallel.md): every rank holds a shard
// of the model and the ranks meet in collectives. The interface is the few operations the
// model and the engine need; MpiCommunicator (src/kiln/mpi/, built only when CMake finds MPI)
// implements them across processes, LocalCommunicator for the single process of TP=1.
//
// Every collective is called in the same order on every rank, from one thread at a time
// (graph::schedule never puts two in flight); a rank that is missing from a collective is a
// fatal error that the implementation reports instead of waiting forever.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace kiln {

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Ends every rank of the group (an error on one rank must not leave the others waiting in
  // a collective). The single-process group just exits.
  [[noreturn]] virtual void abort(int code);

  // recv gets every rank's `bytes` bytes of send, in rank order (recv holds size() * bytes).
  virtual void allgather(const void* send, size_t bytes, void* recv) = 0;
  // data (bytes long on every rank) is overwritten with root's bytes.
  virtual void broadcast(void* data, size_t bytes, int root) = 0;
  // The same, for a wait that may last as long as the root is idle (a follower waiting for
  // the next step): no timeout, and the waiting rank should not keep a core busy. Every rank,
  // root included, must use this one for that broadcast (MPI matches only like with like).
  virtual void broadcast_idle(void* data, size_t bytes, int root) { broadcast(data, bytes, root); }

  // out[i] = sum over ranks r, in rank order 0, 1, ..., of in_r[i]. The partials are gathered
  // and added in the same fixed order on every rank, so every rank gets the same bits
  // whatever the transport's own reduction order would be. `scratch` holds size() * n floats.
  void allreduce_sum(const float* in, float* out, size_t n, float* scratch);
  // root's vector (any length) on every rank; `idle`: the size is awaited with broadcast_idle.
  void broadcast_bytes(std::vector<char>& data, int root, bool idle = false);

  // Time spent inside collectives and how many ran (for per-step figures).
  double collective_seconds() const { return collective_ns_.load() * 1e-9; }
  int64_t collective_calls() const { return collective_calls_.load(); }

 protected:
  void account(int64_t ns) {
    collective_ns_ += ns;
    ++collective_calls_;
  }

 private:
  std::atomic<int64_t> collective_ns_{0};
  std::atomic<int64_t> collective_calls_{0};
};

// One rank: collectives copy their input (TP=1 and tests).
class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  void allgather(const void* send, size_t bytes, void* recv) override;
  void broadcast(void* data, size_t bytes, int root) override;
};

}  // namespace kiln
