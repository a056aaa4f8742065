// The model-level tests drive the executor through engine::SequenceStepper.
#pragma once
#include <cstdint>
#include <vector>

#include "kiln/engine/sequence_stepper.h"

namespace kiln::testing {

using Sequence = engine::SteppedSequence;
using ModelHarness = engine::SequenceStepper;
inline int32_t argmax(const std::vector<float>& row) { return engine::argmax_row(row); }

}  // namespace kiln::testing
