// One step's forward pass as the scheduler runs it: the token masks of the step's
// JSON-constrained rows are handed to ConstraintMasks' worker before the executor starts (every
// state a row samples from is known by then: a sequence's own, or the states along its
// proposals), the executor's outputs are checked against the batch, and the step's time is
// recorded by kind (EngineStats::step_time, with the mask time the pass did not hide) and, for
// decode and verify steps, taught to the speculation policy.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "kiln/engine/constraint_masks.h"
#include "kiln/engine/engine_config.h"
#include "kiln/engine/sequence.h"
#include "kiln/engine/speculation.h"
#include "kiln/engine/step_batch.h"
#include "kiln/engine/token_text.h"

namespace kiln::engine {

class ForwardPass {
 public:
  // What rows a batch holds, for the step-time statistics (decode steps: decode or verify
  // rows).
  enum class Rows : uint8_t { Prompt, PromptAndDecode, Decode };

  ForwardPass(ModelExecutor& executor, ConstraintMasks& masks, const TokenText& tokenizer,
              int64_t vocab)
      : executor_(&executor), masks_(masks), tokenizer_(&tokenizer), vocab_(vocab) {}

  // Runs `batch` (its sequences are `members`, in order) into output(). Returns the error's
  // text when the executor failed or returned outputs that do not fit the batch; empty on
  // success.
  std::string run(const StepBatch& batch, const std::vector<Sequence*>& members, Rows rows,
                  Speculation& speculation, EngineStats& stats);
  // The last step's outputs. Reused from step to step: logits rows can be large.
  StepOutput& output() { return output_; }

 private:
  void prefetch_masks(const StepBatch& batch, const std::vector<Sequence*>& members);

  ModelExecutor* executor_;
  ConstraintMasks& masks_;
  const TokenText* tokenizer_;
  int64_t vocab_;
  StepOutput output_;
};

}  // namespace kiln::engine
