// How the ranks of tensor parallelism stay in step (docs/tensor-parallel.md): rank 0 owns
// HTTP, tokenization and scheduling; before each forward step it broadcasts the step's batch
// (StepBatch: token ids, positions, KV slots, block tables) and every follower rank runs the
// same step on its shard. The collectives inside the step then line up. A shutdown message
// ends the followers' loop when rank 0 is done. Each step carries its mode (StepMode): serving
// lets every rank decide by the same rule (Auto), `kiln bench` forces eager or graph mode per
// step, and the followers must run it the same way or their collectives would not line up.
//
// The KV pools stay in step because only rank 0 allocates pages and every rank writes the
// slots the broadcast batch names; the engine touches KV pages in no other way (the radix
// prefix cache shares whole pages by id, never copies them).
#pragma once
#include <string>
#include <vector>

#include "kiln/base/communicator.h"
#include "kiln/engine/step_batch.h"

namespace kiln::engine {

class ModelRunner;

// Bytes of one message: a step (the batch and its mode) or, when batch is null, shutdown.
std::vector<char> encode_step_message(const StepBatch* batch, StepMode mode = StepMode::Auto);
// False for shutdown; throws kiln::Error on a malformed message. `mode` (optional) receives
// the step's mode.
bool decode_step_message(const std::vector<char>& bytes, StepBatch& batch,
                         StepMode* mode = nullptr);

// What one rank spent: forward steps and, inside them, collectives (the all_reduce after
// attention and after the FFN of every layer, and the LM head's gather or argmax).
struct TpStepStats {
  int64_t steps = 0;
  double step_seconds = 0;        // wall time inside forward()
  double collective_seconds = 0;  // of which inside collectives
  int64_t collectives = 0;
  // Adds one step: `comm_before` is the communicator's collective time when it began.
  void add(double seconds, double comm_seconds, int64_t comm_calls);
  // "N steps, X ms per step, of which Y ms (Z%) in collectives".
  std::string describe() const;
};

// Rank 0's executor: broadcasts each batch, then runs it on rank 0's shard.
class TpLeaderExecutor : public ModelExecutor {
 public:
  TpLeaderExecutor(ModelRunner& local, Communicator& comm) : local_(local), comm_(comm) {}
  ~TpLeaderExecutor() override;
  void forward(const StepBatch& batch, StepOutput& out) override {
    forward_in_mode(batch, out, StepMode::Auto);
  }
  // Every rank runs the step in `mode` (ModelRunner::forward_in_mode).
  void forward_in_mode(const StepBatch& batch, StepOutput& out, StepMode mode);
  int64_t vocab_size() const override;
  int64_t context_length() const override;
  // Tells the followers to leave their loop (once; the destructor does it if not done).
  void shutdown();
  const TpStepStats& stats() const { return stats_; }

 private:
  ModelRunner& local_;
  Communicator& comm_;
  bool shut_down_ = false;
  TpStepStats stats_;
};

// A follower rank: runs every step rank 0 broadcasts, until shutdown. Returns what it spent.
// An error in a step propagates (the caller ends the whole group).
TpStepStats run_tp_follower(ModelRunner& local, Communicator& comm);

}  // namespace kiln::engine
