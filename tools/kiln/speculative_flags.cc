#include "speculative_flags.h"

#include <algorithm>

#include "default_model.h"
#include "kiln/base/error.h"
#include "kiln/engine/draft_model_proposer.h"

namespace kiln::cli {

void add_speculative_flags(CLI::App* cmd, SpeculativeFlags& f) {
  const std::string group = "Speculative decoding";
  cmd->add_option("--speculative-algorithm", f.algorithm,
                  "none | ngram (prompt lookup: proposals copied from the request's own tokens) | "
                  "standalone (a smaller draft model with the same vocabulary); proposals are "
                  "verified in one step and greedy output is unchanged")
      ->transform(CLI::IsMember({"none", "ngram", "standalone"}, CLI::ignore_case))
      ->group(group)
      ->capture_default_str();
  cmd->add_option("--speculative-draft-model-path", f.draft_model_path,
                  "Draft model for --speculative-algorithm standalone (a GGUF file, Hugging Face "
                  "folder or installed model name)")
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
  KILN_CHECK(f.draft_model_path.empty() || f.algorithm == "standalone",
             "--speculative-draft-model-path needs --speculative-algorithm standalone");
  KILN_CHECK(f.algorithm != "standalone" || !f.draft_model_path.empty(),
             "--speculative-algorithm standalone needs --speculative-draft-model-path");
  KILN_CHECK(f.ngram_min_match <= f.ngram_max_match,
             "--speculative-ngram-min-match-window-size ({}) is above the max ({})",
             f.ngram_min_match, f.ngram_max_match);
  c.ngram = f.algorithm == "ngram";
  c.draft_model = f.algorithm == "standalone";
  c.num_draft_tokens = f.num_draft_tokens;
  c.ngram_match.min_match = f.ngram_min_match;
  c.ngram_match.max_match = f.ngram_max_match;
  c.max_batch = f.max_batch;
  return c;
}

void add_verify_plans(const SpeculativeFlags& f, engine::RuntimeOptions& opts) {
  if (f.algorithm == "none") return;
  KILN_CHECK(opts.tp == nullptr, "--speculative-algorithm cannot be combined with --tp yet");
  opts.verify_max_seqs = std::min(f.max_batch, opts.max_graph_bs);
  opts.verify_max_draft = f.num_draft_tokens;
}

std::unique_ptr<engine::Runtime> load_draft_model(const SpeculativeFlags& f,
                                                  const engine::RuntimeOptions& target_options,
                                                  engine::Runtime& target,
                                                  engine::SpeculativeResources& resources) {
  if (f.algorithm != "standalone") return nullptr;
  engine::RuntimeOptions o = target_options;
  o.model_path = resolve_model_name(f.draft_model_path);
  o.quantize.clear();
  o.shared_threads = target.thread_pool();
  // Decode plans for every batch that speculates, and verify plans for the catch-up steps
  // that feed the draft the verified tokens (up to 4 per request).
  o.max_graph_bs = std::min(f.max_batch, target_options.max_graph_bs);
  o.verify_max_seqs = o.max_graph_bs;
  o.verify_max_draft = 3;
  o.context_length = static_cast<int>(target.info().context_length);
  o.check_graph = false;
  auto draft = std::make_unique<engine::Runtime>(o);
  engine::check_draft_vocabulary(target.tokenizer(), target.info().vocab_size, draft->tokenizer(),
                                 draft->info().vocab_size);
  resources.draft_executor = &draft->executor();
  resources.draft_pool = &draft->kv_pool();
  return draft;
}

}  // namespace kiln::cli
