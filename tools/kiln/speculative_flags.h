// The speculative-decoding flags of `kiln serve`, `kiln run` and `kiln chat`, with SGLang's
// names (--speculative-algorithm, --speculative-num-draft-tokens,
// --speculative-ngram-{min,max}-match-window-size), so a command line carries over.
#pragma once
#include <CLI/CLI.hpp>
#include <memory>
#include <string>

#include "kiln/engine/engine.h"
#include "kiln/engine/runtime.h"

namespace kiln::cli {

struct SpeculativeFlags {
  std::string algorithm = "none";
  std::string draft_model_path;
  int num_draft_tokens = 4;
  int ngram_min_match = 2;
  int ngram_max_match = 12;
  int max_batch = 4;
};

void add_speculative_flags(CLI::App* cmd, SpeculativeFlags& f);

// The engine's configuration; throws kiln::Error for what kiln cannot run (a draft model).
engine::SpeculativeConfig speculative_config(const SpeculativeFlags& f);

// What the target's runtime must capture for speculation: graph-mode verify plans for up to
// --speculative-max-batch requests and --speculative-num-draft-tokens proposals (nothing when
// speculation is off). Throws kiln::Error under tensor parallelism (opts.tp set), where verify
// steps are untested: refused rather than trusted.
void add_verify_plans(const SpeculativeFlags& f, engine::RuntimeOptions& opts);

// --speculative-algorithm standalone: loads the draft model beside `target` (its own KV pool
// and captured plans, the target's threads), checks that it shares the target's vocabulary
// (kiln::Error naming the first difference) and points `resources` at it (what the Engine is
// given beside its config). Null for the other algorithms. The runtime must outlive the engine
// that uses `resources`.
std::unique_ptr<engine::Runtime> load_draft_model(const SpeculativeFlags& f,
                                                  const engine::RuntimeOptions& target_options,
                                                  engine::Runtime& target,
                                                  engine::SpeculativeResources& resources);

}  // namespace kiln::cli
