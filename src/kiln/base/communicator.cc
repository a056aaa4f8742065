#include "kiln/base/communicator.h"

#include <cstdlib>
#include <cstring>

#include "kiln/base/error.h"

namespace kiln {

void Communicator::abort(int code) { std::_Exit(code); }

void Communicator::allreduce_sum(const float* in, float* out, size_t n, float* scratch) {
  const int ranks = size();
  allgather(in, n * sizeof(float), scratch);
  // Rank order, on every rank: (p0 + p1) + p2 + ... is the same expression everywhere.
  std::memcpy(out, scratch, n * sizeof(float));
  for (int r = 1; r < ranks; ++r) {
    const float* part = scratch + static_cast<size_t>(r) * n;
    for (size_t i = 0; i < n; ++i) out[i] += part[i];
  }
}

void Communicator::broadcast_bytes(std::vector<char>& data, int root, bool idle) {
  uint64_t n = data.size();
  if (idle) {
    broadcast_idle(&n, sizeof(n), root);
  } else {
    broadcast(&n, sizeof(n), root);
  }
  data.resize(n);
  if (n > 0) broadcast(data.data(), n, root);
}

void LocalCommunicator::allgather(const void* send, size_t bytes, void* recv) {
  if (bytes > 0 && recv != send) std::memmove(recv, send, bytes);
}

void LocalCommunicator::broadcast(void* data, size_t bytes, int root) {
  KILN_CHECK(root == 0, "broadcast from rank {} in a group of one", root);
}

}  // namespace kiln
