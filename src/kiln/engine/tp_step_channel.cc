#include "kiln/engine/tp_step_channel.h"

#include <fmt/format.h>

#include <chrono>
#include <cstring>

#include "kiln/base/error.h"
#include "kiln/base/log.h"
#include "kiln/engine/model_runner.h"

namespace kiln::engine {
namespace {

constexpr uint32_t kStepMagic = 0x6b747032;  // "ktp2": with the step mode
enum class Kind : uint32_t { Shutdown = 0, Step = 1 };

class Writer {
 public:
  explicit Writer(std::vector<char>& out) : out_(out) {}
  template <typename T>
  void put(const T& v) {
    const auto* p = reinterpret_cast<const char*>(&v);
    out_.insert(out_.end(), p, p + sizeof(T));
  }
  void put_vector(const std::vector<int32_t>& v) {
    put<uint64_t>(v.size());
    const auto* p = reinterpret_cast<const char*>(v.data());
    out_.insert(out_.end(), p, p + v.size() * sizeof(int32_t));
  }

 private:
  std::vector<char>& out_;
};

class Reader {
 public:
  explicit Reader(const std::vector<char>& in) : in_(in) {}
  template <typename T>
  T get() {
    KILN_CHECK(pos_ + sizeof(T) <= in_.size(), "tensor-parallel step message is truncated");
    T v;
    std::memcpy(&v, in_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  void get_vector(std::vector<int32_t>& v) {
    const auto n = get<uint64_t>();
    KILN_CHECK(n <= (in_.size() - pos_) / sizeof(int32_t),
               "tensor-parallel step message is truncated");
    v.resize(n);
    std::memcpy(v.data(), in_.data() + pos_, n * sizeof(int32_t));
    pos_ += n * sizeof(int32_t);
  }
  bool done() const { return pos_ == in_.size(); }

 private:
  const std::vector<char>& in_;
  size_t pos_ = 0;
};

}  // namespace

std::vector<char> encode_step_message(const StepBatch* batch, StepMode mode) {
  std::vector<char> bytes;
  Writer w(bytes);
  w.put(kStepMagic);
  w.put(batch == nullptr ? Kind::Shutdown : Kind::Step);
  if (batch == nullptr) return bytes;
  w.put(mode);
  w.put_vector(batch->token_ids);
  w.put_vector(batch->positions);
  w.put_vector(batch->token_seq);
  w.put_vector(batch->slots);
  w.put<uint8_t>(batch->greedy_only ? 1 : 0);
  w.put<uint64_t>(batch->seqs.size());
  for (const StepSequence& s : batch->seqs) {
    w.put_vector(s.pages);
    w.put(s.seq_len);
    w.put<uint8_t>((s.want_logits ? 1 : 0) | (s.all_logits ? 2 : 0));
  }
  return bytes;
}

bool decode_step_message(const std::vector<char>& bytes, StepBatch& batch, StepMode* mode) {
  Reader r(bytes);
  KILN_CHECK(r.get<uint32_t>() == kStepMagic, "tensor-parallel step message has a bad header");
  const auto kind = r.get<Kind>();
  if (kind == Kind::Shutdown) return false;
  KILN_CHECK(kind == Kind::Step, "tensor-parallel step message of unknown kind {}",
             static_cast<uint32_t>(kind));
  const auto step_mode = r.get<StepMode>();
  KILN_CHECK(
      step_mode == StepMode::Auto || step_mode == StepMode::Eager || step_mode == StepMode::Graph,
      "tensor-parallel step message has unknown step mode {}", static_cast<int>(step_mode));
  if (mode != nullptr) *mode = step_mode;
  r.get_vector(batch.token_ids);
  r.get_vector(batch.positions);
  r.get_vector(batch.token_seq);
  r.get_vector(batch.slots);
  batch.greedy_only = r.get<uint8_t>() != 0;
  const auto n_seqs = r.get<uint64_t>();
  KILN_CHECK(n_seqs <= bytes.size(), "tensor-parallel step message is truncated");
  batch.seqs.resize(n_seqs);
  for (StepSequence& s : batch.seqs) {
    r.get_vector(s.pages);
    s.seq_len = r.get<int32_t>();
    const auto flags = r.get<uint8_t>();
    s.want_logits = (flags & 1) != 0;
    s.all_logits = (flags & 2) != 0;
  }
  KILN_CHECK(r.done(), "tensor-parallel step message has trailing bytes");
  return true;
}

TpLeaderExecutor::~TpLeaderExecutor() {
  try {
    shutdown();
  } catch (const std::exception& e) {
    KILN_LOG_WARN("tensor parallel: could not tell the other ranks to stop: {}", e.what());
  }
}

void TpStepStats::add(double seconds, double comm_seconds, int64_t comm_calls) {
  ++steps;
  step_seconds += seconds;
  collective_seconds += comm_seconds;
  collectives += comm_calls;
}

std::string TpStepStats::describe() const {
  if (steps == 0) return "no steps";
  return fmt::format(
      "{} steps, {:.3f} ms per step, of which {:.3f} ms ({:.1f}%) in {:.1f} collectives per step",
      steps, 1e3 * step_seconds / steps, 1e3 * collective_seconds / steps,
      step_seconds > 0 ? 100.0 * collective_seconds / step_seconds : 0.0,
      static_cast<double>(collectives) / steps);
}

namespace {

struct CollectiveTotals {
  double seconds;
  int64_t calls;
};
CollectiveTotals totals_of(const Communicator& comm) {
  return {comm.collective_seconds(), comm.collective_calls()};
}

// Runs one step and adds it to `stats`, with the collectives it ran.
void timed_forward(ModelRunner& local, const Communicator& comm, const StepBatch& batch,
                   StepMode mode, StepOutput& out, TpStepStats& stats) {
  const CollectiveTotals before = totals_of(comm);
  const auto start = std::chrono::steady_clock::now();
  local.forward_in_mode(batch, out, mode);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const CollectiveTotals after = totals_of(comm);
  stats.add(seconds, after.seconds - before.seconds, after.calls - before.calls);
}

}  // namespace

int64_t TpLeaderExecutor::vocab_size() const { return local_.vocab_size(); }
int64_t TpLeaderExecutor::context_length() const { return local_.context_length(); }

void TpLeaderExecutor::forward_in_mode(const StepBatch& batch, StepOutput& out, StepMode mode) {
  KILN_CHECK(!shut_down_, "tensor-parallel step after shutdown");
  std::vector<char> message = encode_step_message(&batch, mode);
  // The followers wait with broadcast_idle, and MPI pairs a broadcast only with the same kind.
  comm_.broadcast_bytes(message, 0, /*idle=*/true);
  timed_forward(local_, comm_, batch, mode, out, stats_);
}

void TpLeaderExecutor::shutdown() {
  if (shut_down_) return;
  shut_down_ = true;
  std::vector<char> message = encode_step_message(nullptr);
  comm_.broadcast_bytes(message, 0, /*idle=*/true);
  KILN_LOG_INFO("tensor parallel rank 0: {}", stats_.describe());
}

TpStepStats run_tp_follower(ModelRunner& local, Communicator& comm) {
  KILN_CHECK(comm.rank() != 0, "rank 0 leads; it does not follow");
  StepBatch batch;
  StepMode mode = StepMode::Auto;
  StepOutput out;
  std::vector<char> message;
  TpStepStats stats;
  while (true) {
    // Waiting here may last as long as the server is idle: no timeout, no spinning.
    comm.broadcast_bytes(message, 0, /*idle=*/true);
    if (!decode_step_message(message, batch, &mode)) break;
    timed_forward(local, comm, batch, mode, out, stats);
  }
  KILN_LOG_INFO("tensor parallel rank {}: {}", comm.rank(), stats.describe());
  return stats;
}

}  // namespace kiln::engine
