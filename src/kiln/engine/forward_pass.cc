#include "kiln/engine/forward_pass.h"

#include <chrono>
#include <exception>
#include <utility>

#include "kiln/base/error.h"

namespace kiln::engine {

void ForwardPass::prefetch_masks(const StepBatch& batch, const std::vector<Sequence*>& members) {
  std::vector<ConstraintMasks::Row> rows;
  for (size_t i = 0; i < members.size(); ++i) {
    const Sequence& seq = *members[i];
    const StepSequence& ss = batch.seqs[i];
    // Only rows that sample: the sequence's last row, once the step reaches its end; verify
    // rows along the proposals.
    if (!seq.json.open() || !ss.want_logits ||
        ss.seq_len < static_cast<int64_t>(seq.tokens.size())) {
      continue;
    }
    for (ConstraintMatcher& state : seq.json.states_along(seq.spec.draft, *tokenizer_))
      rows.push_back({std::move(state), seq.json.end_ids()});
  }
  masks_.prefetch(std::move(rows));
}

std::string ForwardPass::run(const StepBatch& batch, const std::vector<Sequence*>& members,
                             Rows rows, Speculation& speculation, EngineStats& stats) {
  output_.logits.clear();
  output_.greedy_ids.clear();
  output_.vocab = 0;
  output_.used_graph = false;
  const int64_t n_logits = batch.logit_rows();
  const auto start = std::chrono::steady_clock::now();
  prefetch_masks(batch, members);
  try {
    executor_->forward(batch, output_);
    const double forward_seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // The mask time the forward pass did not hide is part of what the step's rows cost (the
    // speculation policy prices verify rows with it).
    const double mask_wait = masks_.finish();
    stats.json_mask_wait_seconds += mask_wait;
    const double seconds = forward_seconds + mask_wait;
    // Decode and verify steps (every row returns a token) teach the speculation policy what
    // rows cost.
    if (batch.returns_every_row()) speculation.record_step(batch.num_tokens(), seconds);
    const bool graph = output_.used_graph;
    const StepKind kind = rows == Rows::Prompt            ? StepKind::Prefill
                          : rows == Rows::PromptAndDecode ? StepKind::Mixed
                          : batch.is_decode()
                              ? (graph ? StepKind::DecodeGraph : StepKind::DecodeEager)
                              : (graph ? StepKind::VerifyGraph : StepKind::VerifyEager);
    StepTime& t = stats.step_time[static_cast<size_t>(kind)];
    ++t.steps;
    t.rows += batch.num_tokens();
    t.seconds += seconds;
    const int64_t n_hidden = batch.hidden_rows();
    KILN_CHECK(n_hidden == 0 ||
                   static_cast<int64_t>(output_.hidden.size()) == n_hidden * output_.hidden_dim,
               "the executor returned {} hidden values for {} rows", output_.hidden.size(),
               n_hidden);
    if (batch.greedy_only) {
      KILN_CHECK(static_cast<int64_t>(output_.greedy_ids.size()) == n_logits,
                 "the executor returned {} greedy ids for {} rows", output_.greedy_ids.size(),
                 n_logits);
    } else {
      KILN_CHECK(output_.vocab == vocab_ &&
                     static_cast<int64_t>(output_.logits.size()) == n_logits * vocab_,
                 "the executor returned {} logits of vocab {} for {} rows of vocab {}",
                 output_.logits.size(), output_.vocab, n_logits, vocab_);
    }
  } catch (const std::exception& e) {
    masks_.finish();
    return e.what();
  }
  if (output_.used_graph) {
    ++stats.graph_steps;
  } else {
    ++stats.eager_steps;
  }
  return {};
}

}  // namespace kiln::engine
