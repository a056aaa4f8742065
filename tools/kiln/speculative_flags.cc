#include "speculative_flags.h"

#include <algorithm>

#include "kiln/base/error.h"

namespace kiln::cli {

void add_speculative_flags(CLI::App* cmd, SpeculativeFlags& f) {
  const std::string group = "Speculative decoding";
  cmd->add_option("--speculative-algorithm", f.algorithm,
                  "none | ngram (prompt lookup: proposals copied from the request's own tokens, "
                  "verified in one step; greedy output is unchanged)")
      ->transform(CLI::IsMember({"none", "ngram", "standalone"}, CLI::ignore_case))
      ->group(group)
      ->capture_default_str();
  cmd->add_option("--speculative-draft-model-path", f.draft_model_path,
                  "Draft model for --speculative-algorithm standalone (not available yet)")
      ->group(group);
  cmd->add_option("--speculative-num-draft-tokens", f.num_draft_tokens,
                  "Most tokens proposed per request and step")
      ->check(CLI::Range(1, engine::SpeculativeConfig::kMaxDraftTokens))
      ->group(group)
      ->capture_default_str();
  cmd->add_option("--speculative-ngram-min-match-window-size", f.ngram_min_match,
                  "Shortest suffix of the request's tokens looked up for a proposal")
      ->check(CLI::Range(1, 64))
      ->group(group)
      ->capture_default_str();
  cmd->add_option("--speculative-ngram-max-match-window-size", f.ngram_max_match,
                  "Longest suffix looked up (longer matches are tried first)")
      ->check(CLI::Range(1, 64))
      ->group(group)
      ->capture_default_str();
  cmd->add_option("--speculative-max-batch", f.max_batch,
                  "Speculate only while at most this many requests decode")
      ->check(CLI::Range(1, 1 << 16))
      ->group(group)
      ->capture_default_str();
}

engine::SpeculativeConfig speculative_config(const SpeculativeFlags& f) {
  engine::SpeculativeConfig c;
  KILN_CHECK(f.algorithm != "standalone",
             "--speculative-algorithm standalone (a draft model) is not available yet; use ngram");
  KILN_CHECK(f.draft_model_path.empty() || f.algorithm == "standalone",
             "--speculative-draft-model-path needs --speculative-algorithm standalone");
  KILN_CHECK(f.ngram_min_match <= f.ngram_max_match,
             "--speculative-ngram-min-match-window-size ({}) is above the max ({})",
             f.ngram_min_match, f.ngram_max_match);
  c.ngram = f.algorithm == "ngram";
  c.num_draft_tokens = f.num_draft_tokens;
  c.ngram_match.min_match = f.ngram_min_match;
  c.ngram_match.max_match = f.ngram_max_match;
  c.max_batch = f.max_batch;
  return c;
}

void add_verify_plans(const engine::SpeculativeConfig& spec, engine::RuntimeOptions& opts) {
  if (!spec.enabled()) return;
  KILN_CHECK(opts.tp == nullptr, "--speculative-algorithm cannot be combined with --tp yet");
  opts.verify_max_seqs = std::min(spec.max_batch, opts.max_graph_bs);
  opts.verify_max_draft = spec.num_draft_tokens;
}

}  // namespace kiln::cli
